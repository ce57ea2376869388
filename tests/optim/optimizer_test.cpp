// Optimizer updates against PyTorch. The expected values are what torch 1.13's
// torch.optim.SGD / AdamW produce for the same parameter and gradients (the
// script is in the comment below); the first ones are also worked by hand.
//
//   p = Parameter(tensor([[1., -2.], [.5, 3.]]))
//   for g in GRADS: p.grad = tensor(g); opt.step()
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "artel/core/rng.h"
#include "artel/core/threads.h"
#include "artel/optim/adamw.h"
#include "artel/optim/clip.h"
#include "artel/optim/sgd.h"
#include "error_of.h"

namespace artel::optim {
namespace {

using ::testing::HasSubstr;
using test_support::error_of;
using Steps = std::vector<std::vector<float>>;

const Steps kGrads = {{0.5f, -0.25f, 1.0f, 0.0f}, {-0.25f, 0.5f, 0.1f, 2.0f}, {0.3f, 0.3f, -1.0f, -0.5f}};

Variable make_param() { return Variable(Tensor::from_vector({1.0f, -2.0f, 0.5f, 3.0f}, {2, 2}), true); }

// Runs three steps of `opt` over `p` with kGrads and checks p after each.
void expect_steps(Optimizer& opt, Variable& p, const Steps& want) {
  for (size_t s = 0; s < kGrads.size(); ++s) {
    p.set_grad(Tensor::from_vector(kGrads[s], {2, 2}));
    opt.step();
    std::vector<float> got = p.value().to_vector();
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_NEAR(got[i], want[s][i], 2e-6f * std::max(1.0f, std::fabs(want[s][i]))) << "step " << s + 1 << " [" << i << "]";
  }
}

TEST(Sgd, MomentumAndWeightDecayMatchPyTorch) {
  // Element 0 by hand: g = .5 + .01·1 = .51, buf = .51, p = 1 − .1·.51 = .949;
  // then g = −.25 + .01·.949 = −.24051, buf = .9·.51 + g = .21849, p = .949 − .1·buf = .927151.
  Variable p = make_param();
  Sgd opt(one_group({{"p", p}}, 0.1f, 0.01f), {.momentum = 0.9f});
  expect_steps(opt, p, {{0.949000001f, -1.97300005f, 0.399500012f, 2.99699998f},
                        {0.927151024f, -1.99672711f, 0.298650503f, 2.79130292f},
                        {0.876559794f, -2.04608464f, 0.307587296f, 2.65338421f}});
}

TEST(Sgd, NesterovMatchesPyTorch) {
  Variable p = make_param();
  Sgd opt(one_group({{"p", p}}, 0.1f, 0.01f), {.momentum = 0.9f, .nesterov = true});
  expect_steps(opt, p, {{0.903100014f, -1.94869995f, 0.309049994f, 2.99429989f},
                        {0.907574117f, -2.01812744f, 0.208057806f, 2.60618067f},
                        {0.831189215f, -2.09053159f, 0.316047668f, 2.52961659f}});
}

TEST(Sgd, DampeningSkipsTheFirstStepAsPyTorch) {
  Variable p = make_param();
  Sgd opt(one_group({{"p", p}}, 0.1f), {.momentum = 0.9f, .dampening = 0.5f});
  expect_steps(opt, p, {{0.949999988f, -1.97500002f, 0.400000006f, 3.0f},
                        {0.917499959f, -1.97750008f, 0.305000007f, 2.9000001f},
                        {0.873249948f, -1.99475014f, 0.269500017f, 2.83500004f}});
}

TEST(Sgd, PlainWithWeightDecayMatchesPyTorch) {
  Variable p = make_param();
  Sgd opt(one_group({{"p", p}}, 0.1f, 0.1f));
  expect_steps(opt, p, {{0.939999998f, -1.95500004f, 0.395000011f, 2.97000003f},
                        {0.955600023f, -1.98545003f, 0.38105002f, 2.74029994f},
                        {0.916043997f, -1.99559557f, 0.477239519f, 2.76289701f}});
  EXPECT_TRUE(opt.state_dict().count("step.p"));
  EXPECT_EQ(opt.state_dict().size(), 1u);  // no momentum buffer without momentum
}

TEST(Sgd, RejectsBadOptions) {
  Variable p = make_param();
  EXPECT_THROW(Sgd(one_group({{"p", p}}, 0.1f), {.momentum = 0.0f, .nesterov = true}), Error);
  EXPECT_THROW(Sgd(one_group({{"p", p}}, 0.1f), {.momentum = 0.9f, .dampening = 0.1f, .nesterov = true}), Error);
  EXPECT_THROW(Sgd(one_group({{"p", p}}, -0.1f)), Error);
  EXPECT_THROW(Sgd(std::vector<ParamGroup>{{{{"p", p}}, 0.1f, 0}, {{{"p", p}}, 0.1f, 0}}), Error);
  // One tensor under two names was stepped twice.
  EXPECT_THAT([&] { Sgd(one_group({{"a.weight", p}, {"b.weight", p}}, 0.1f)); },
              ::testing::ThrowsMessage<Error>(HasSubstr("parameter 'b.weight' is the tensor of 'a.weight' again")));
}

TEST(AdamW, DefaultsMatchPyTorch) {
  // Element 0 by hand, step 1: p = .99·1, m = .05, v = .00025, m̂ = .5, v̂ = .25,
  // p −= .1·.5/(.5 + 1e-8) -> .89.
  Variable p = make_param();
  AdamW opt(one_group({{"p", p}}, 0.1f, 0.1f));
  expect_steps(opt, p, {{0.890000045f, -1.88f, 0.395000011f, 2.97000003f},
                        {0.854466379f, -1.89781034f, 0.316968948f, 2.86588621f},
                        {0.797556162f, -1.93398631f, 0.31830737f, 2.79692531f}});
}

TEST(AdamW, W2RecipeMatchesPyTorch) {
  Variable p = make_param();
  AdamW opt(one_group({{"p", p}}, 1e-3f, 0.1f), {.beta2 = 0.99f});
  expect_steps(opt, p, {{0.998899996f, -1.99879992f, 0.498950005f, 2.99970007f},
                        {0.998533428f, -1.99896562f, 0.49815765f, 2.9986577f},
                        {0.997949004f, -1.99931705f, 0.498152912f, 2.99795485f}});
}

TEST(AdamW, DecayGroupsSplitByDimension) {
  Variable w(Tensor::zeros({2, 3}), true), b(Tensor::zeros({3}), true), e(Tensor::zeros({4, 2, 2}), true);
  auto groups = decay_groups({{"w", w}, {"b", b}, {"e", e}}, 0.5f, 0.1f);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].weight_decay, 0.1f);
  EXPECT_EQ(groups[1].weight_decay, 0.0f);
  ASSERT_EQ(groups[0].params.size(), 2u);
  EXPECT_EQ(groups[0].params[0].first, "w");
  EXPECT_EQ(groups[0].params[1].first, "e");
  EXPECT_EQ(groups[1].params[0].first, "b");
  EXPECT_EQ(groups[1].lr, 0.5f);
  // A 1-D parameter in the no-decay group keeps its value under zero gradients.
  Variable bias(Tensor::full({3}, 2.0f), true), weight(Tensor::full({1, 3}, 2.0f), true);
  AdamW opt(decay_groups({{"bias", bias}, {"weight", weight}}, 0.1f, 0.5f));
  bias.set_grad(Tensor::zeros({3}));
  weight.set_grad(Tensor::zeros({1, 3}));
  opt.step();
  EXPECT_EQ(bias.value().to_vector(), std::vector<float>(3, 2.0f));
  EXPECT_NEAR(weight.value().to_vector()[0], 2.0f * (1 - 0.05f), 1e-6f);
}

TEST(Optimizer, LearningRatesPerGroupOrAll) {
  Variable a = make_param(), b = make_param();
  Sgd opt(std::vector<ParamGroup>{{{{"a", a}}, 0.1f, 0}, {{{"b", b}}, 0.1f, 0}});
  opt.set_lr(1, 1.0f);
  a.set_grad(Tensor::full({2, 2}, 1.0f));
  b.set_grad(Tensor::full({2, 2}, 1.0f));
  opt.step();
  EXPECT_NEAR(a.value().to_vector()[0], 0.9f, 1e-6f);
  EXPECT_NEAR(b.value().to_vector()[0], 0.0f, 1e-6f);
  opt.set_lr(0.5f);
  EXPECT_EQ(opt.param_groups()[0].lr, 0.5f);
  EXPECT_EQ(opt.param_groups()[1].lr, 0.5f);
  EXPECT_THROW(opt.set_lr(2, 0.1f), Error);
  EXPECT_THROW(opt.set_lr(-1.0f), Error);
}

TEST(Optimizer, SkipsParametersWithoutGradient) {
  Variable a = make_param(), b = make_param();
  AdamW opt(one_group({{"a", a}, {"b", b}}, 0.1f, 0.1f));
  a.set_grad(Tensor::full({2, 2}, 1.0f));
  opt.step();
  EXPECT_EQ(b.value().to_vector(), make_param().value().to_vector());  // no decay either, as PyTorch
  EXPECT_TRUE(opt.state_dict().count("exp_avg.a"));
  EXPECT_FALSE(opt.state_dict().count("exp_avg.b"));
  opt.zero_grad();
  EXPECT_FALSE(a.grad().defined());
}

// A sharded wrapper updates bucket by bucket and starts each bucket's gather
// once it is done: in any order of batches the update is the step's, each
// batch is done before `done` names it, and a list that leaves a parameter
// out or names one twice is refused.
TEST(Optimizer, AStepInBatchesIsTheStepDoneBatchByBatch) {
  Variable a = make_param(), b = make_param(), c = make_param(), a2 = make_param(), b2 = make_param(),
           c2 = make_param();
  auto groups = [](Variable& x, Variable& y, Variable& z) {
    return std::vector<ParamGroup>{{{{"c", z}}, 0.1f, 0.1f}, {{{"a", x}, {"b", y}}, 0.1f, 0}};
  };
  AdamW batched(groups(a, b, c)), whole(groups(a2, b2, c2));
  for (AdamW* opt : {&batched, &whole}) opt->shard({{"a", {0, 4}}, {"b", {0, 0}}, {"c", {1, 3}}});
  for (size_t s = 0; s < kGrads.size(); ++s) {
    for (Variable* v : {&a, &b, &c, &a2, &b2, &c2}) v->set_grad(Tensor::from_vector(kGrads[s], {2, 2}));
    std::vector<size_t> done;
    const std::vector<float> a_before = a.value().to_vector(), c_before = c.value().to_vector();
    batched.step(0.5f, {{"b", "a"}, {"c"}}, [&](size_t batch) {
      done.push_back(batch);
      if (batch == 0) {
        EXPECT_NE(a.value().to_vector(), a_before) << "batch 0 named before its update";
        EXPECT_EQ(c.value().to_vector(), c_before) << "batch 1 updated before batch 0 was named";
      }
    });
    whole.step(0.5f);
    EXPECT_EQ(done, (std::vector<size_t>{0, 1}));
    EXPECT_EQ(a.value().to_vector(), a2.value().to_vector());
    EXPECT_EQ(c.value().to_vector(), c2.value().to_vector());
  }
  auto none = [](size_t) {};
  EXPECT_THAT(error_of([&] { batched.step(1.0f, {{"a", "b"}}, none); }), HasSubstr("leaves out 'c'"));
  EXPECT_THAT(error_of([&] { batched.step(1.0f, {{"a", "b", "c"}, {"a"}}, none); }), HasSubstr("names 'a' twice"));
  EXPECT_THAT(error_of([&] { batched.step(1.0f, {{"a", "b", "c", "d"}}, none); }), HasSubstr("'d', which it does not"));
}

TEST(Optimizer, StateRoundTripContinuesExactly) {
  Variable p1 = make_param(), p2 = make_param();
  AdamW a(one_group({{"p", p1}}, 0.1f, 0.1f)), b(one_group({{"p", p2}}, 0.1f, 0.1f));
  p1.set_grad(Tensor::from_vector(kGrads[0], {2, 2}));
  a.step();
  OptimizerState s = a.state_dict();
  EXPECT_EQ(s.at("step.p").data<int64_t>()[0], 1);
  EXPECT_EQ(s.at("exp_avg.p").shape(), (Shape{2, 2}));
  b.load_state_dict(s);
  p2.value().copy_from(p1.value());
  for (auto* v : {&p1, &p2}) v->set_grad(Tensor::from_vector(kGrads[1], {2, 2}));
  a.step();
  b.step();
  EXPECT_EQ(p1.value().to_vector(), p2.value().to_vector());
}

TEST(Optimizer, LoadStateErrorsNameTheEntry) {
  Variable p = make_param();
  AdamW opt(one_group({{"p", p}}, 0.1f));
  p.set_grad(Tensor::full({2, 2}, 1.0f));
  opt.step();
  OptimizerState good = opt.state_dict();
  auto error_of = [&](const OptimizerState& s) -> std::string {
    try {
      opt.load_state_dict(s);
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  OptimizerState extra = good;
  extra["exp_avg.q"] = Tensor::zeros({2, 2});
  EXPECT_THAT(error_of(extra), HasSubstr("unexpected 'exp_avg.q'"));
  OptimizerState shape = good;
  shape["exp_avg_sq.p"] = Tensor::zeros({4});
  EXPECT_THAT(error_of(shape), HasSubstr("'exp_avg_sq.p' has float32 [4], expected float32 [2, 2]"));
  OptimizerState missing = good;
  missing.erase("exp_avg.p");
  EXPECT_THAT(error_of(missing), HasSubstr("missing 'exp_avg.p'"));
  EXPECT_EQ(error_of(good), "no error");
}

TEST(Optimizer, BigTensorsSplitOverThreadsGiveTheSameResult) {
  const int64_t n = 300001;  // several chunks, odd tail
  Tensor g = Tensor::empty({n}), p0 = Tensor::empty({n});
  Rng rng(4);
  for (int64_t i = 0; i < n; ++i) g.data<float>()[i] = rng.normal(), p0.data<float>()[i] = rng.normal();
  auto run = [&](int threads) {
    set_num_threads(threads);
    Variable p(p0.clone(), true);
    AdamW opt(one_group({{"p", p}}, 0.01f, 0.1f));
    for (int s = 0; s < 2; ++s) {
      p.set_grad(g);
      opt.step();
    }
    set_num_threads(1);
    return p.value().to_vector();
  };
  EXPECT_EQ(run(1), run(2));
}

TEST(ClipGradNorm, MatchesPyTorch) {
  Variable a(Tensor::zeros({3}), true), b(Tensor::zeros({2, 2}), true), none(Tensor::zeros({2}), true);
  a.set_grad(Tensor::from_vector({3, 0, -4}, {3}));
  b.set_grad(Tensor::from_vector({1, 2, -2, 4}, {2, 2}));
  EXPECT_NEAR(clip_grad_norm({a, b, none}, 0.0f), 7.0710678f, 1e-5f);  // 0 = off: measured only
  EXPECT_EQ(a.grad().to_vector(), (std::vector<float>{3, 0, -4}));
  EXPECT_NEAR(clip_grad_norm({a, b, none}, 100.0f), 7.0710678f, 1e-5f);  // under the limit: unchanged
  EXPECT_EQ(b.grad().to_vector(), (std::vector<float>{1, 2, -2, 4}));
  EXPECT_NEAR(clip_grad_norm({a, b, none}, 2.0f), 7.0710678f, 1e-5f);
  std::vector<float> ga = a.grad().to_vector(), gb = b.grad().to_vector();
  std::vector<float> wa = {0.848528028f, 0.0f, -1.13137066f}, wb = {0.282842666f, 0.565685332f, -0.565685332f, 1.13137066f};
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(ga[i], wa[i], 1e-6f);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(gb[i], wb[i], 1e-6f);
  EXPECT_NEAR(grad_norm({a, b}), 2.0f, 1e-5f);
}

TEST(ClipGradNorm, NeverScalesAGradientSharedWithAnotherLeaf) {
  // The engine may hand one tensor to two leaves (Note [Gradient ownership]).
  Variable a(Tensor::zeros({2}), true), b(Tensor::zeros({2}), true);
  Tensor shared = Tensor::from_vector({3, 4}, {2});
  a.set_grad(shared);
  b.set_grad(shared);
  EXPECT_NEAR(clip_grad_norm({a, b}, 1.0f), std::sqrt(50.0f), 1e-5f);
  EXPECT_NEAR(a.grad().to_vector()[0], 3.0f / std::sqrt(50.0f), 1e-6f);
  EXPECT_NEAR(b.grad().to_vector()[0], 3.0f / std::sqrt(50.0f), 1e-6f);
  EXPECT_EQ(shared.to_vector(), (std::vector<float>{3, 4}));
}

// shard(): two optimizers, each updating its half of every parameter (and
// one of them nothing of the small one), put together are bit-identical to one

// step(grad_scale) is clipping applied as the update reads: bit-identical to
// scaling the gradients in place first, for AdamW and for SGD with momentum
// and weight decay, over several chunks with an odd tail.
TEST(Optimizer, AGradientScaleEqualsScalingTheGradientsFirst) {
  const int64_t n = 70001;
  Tensor g = Tensor::empty({n}), p0 = Tensor::empty({n});
  Rng rng(9);
  for (int64_t i = 0; i < n; ++i) g.data<float>()[i] = rng.normal(), p0.data<float>()[i] = rng.normal();
  const float coef = 0.3712f;
  // fused: coef handed to step(); else the gradients scaled by `first` before a plain step.
  auto run = [&](auto make, bool fused, float first) {
    Variable p(p0.clone(), true);
    std::unique_ptr<Optimizer> opt = make(p);
    for (int s = 0; s < 3; ++s) {
      Tensor grad = g.clone();
      if (!fused)
        for (int64_t i = 0; i < n; ++i) grad.data<float>()[i] *= first;
      p.set_grad(grad);
      opt->step(fused ? coef : 1.0f);
    }
    return p.value().to_vector();
  };
  auto adamw = [](Variable& p) { return std::make_unique<AdamW>(one_group({{"p", p}}, 0.01f, 0.1f)); };
  auto sgd = [](Variable& p) { return std::make_unique<Sgd>(one_group({{"p", p}}, 0.1f, 0.01f), SgdOptions{0.9f}); };
  EXPECT_EQ(run(adamw, true, 0), run(adamw, false, coef));
  EXPECT_EQ(run(sgd, true, 0), run(sgd, false, coef));
  EXPECT_NE(run(sgd, true, 0), run(sgd, false, 1.0f));  // the scale is applied at all
}
// optimizer updating everything; step counts advance everywhere.
TEST(Optimizer, ShardedHalvesPutTogetherEqualTheWholeStep) {
  auto run = [](auto make, const std::vector<std::map<std::string, ElementRange>>& shards) {
    std::vector<Variable> w, b;
    std::vector<std::unique_ptr<Optimizer>> opts;
    for (size_t s = 0; s < shards.size(); ++s) {
      w.push_back(make_param());
      b.push_back(Variable(Tensor::from_vector({0.5f, -1.0f}, {2}), true));
      opts.push_back(make(nn::NamedParameters{{"w", w[s]}, {"b", b[s]}}));
      if (!shards[s].empty()) opts[s]->shard(shards[s]);
    }
    std::vector<float> got_w(4), got_b(2);
    for (size_t step = 0; step < kGrads.size(); ++step)
      for (size_t s = 0; s < shards.size(); ++s) {
        w[s].set_grad(Tensor::from_vector(kGrads[step], {2, 2}));
        b[s].set_grad(Tensor::from_vector({kGrads[step][1], kGrads[step][3]}, {2}));
        opts[s]->step();
      }
    for (size_t s = 0; s < shards.size(); ++s) {
      auto owned = [&](const std::string& name, int64_t i) {
        return shards[s].empty() || (shards[s].at(name).begin <= i && i < shards[s].at(name).end);
      };
      for (int64_t i = 0; i < 4; ++i)
        if (owned("w", i)) got_w[i] = w[s].value().to_vector()[i];
      for (int64_t i = 0; i < 2; ++i)
        if (owned("b", i)) got_b[i] = b[s].value().to_vector()[i];
      EXPECT_EQ(opts[s]->state_dict().at("step.b").data<int64_t>()[0], 3);
    }
    got_w.insert(got_w.end(), got_b.begin(), got_b.end());
    return got_w;
  };
  const std::vector<std::map<std::string, ElementRange>> whole = {{}},
                                                          halves = {{{"w", {0, 3}}, {"b", {0, 2}}},
                                                                    {{"w", {3, 4}}, {"b", {2, 2}}}};
  auto sgd = [](nn::NamedParameters p) {
    return std::make_unique<Sgd>(one_group(p, 0.1f, 0.01f), SgdOptions{.momentum = 0.9f, .nesterov = true});
  };
  auto adamw = [](nn::NamedParameters p) { return std::make_unique<AdamW>(decay_groups(p, 0.1f, 0.1f)); };
  EXPECT_EQ(run(sgd, halves), run(sgd, whole));
  EXPECT_EQ(run(adamw, halves), run(adamw, whole));
}

TEST(Optimizer, ShardRangesAreChecked) {
  Variable p = make_param();
  Sgd opt(one_group({{"p", p}}, 0.1f));
  EXPECT_THAT([&] { opt.shard({{"p", {2, 5}}}); }, ThrowsMessage<Error>(HasSubstr("outside its 4 elements")));
  EXPECT_THAT([&] { opt.shard({{"q", {0, 1}}}); }, ThrowsMessage<Error>(HasSubstr("no range for parameter 'p'")));
}

// A sharded checkpoint restores one parameter at a time: the owned elements
// of each buffer and the step count, into an optimizer owning other elements.
TEST(Optimizer, PerParameterStateMovesIntoAnotherShard) {
  Variable p1 = make_param(), p2 = make_param();
  AdamW whole(one_group({{"p", p1}}, 0.1f, 0.1f)), half(one_group({{"p", p2}}, 0.1f, 0.1f));
  half.shard({{"p", {1, 3}}});
  EXPECT_EQ(whole.steps("p"), 0);
  p1.set_grad(Tensor::from_vector(kGrads[0], {2, 2}));
  whole.step();
  EXPECT_EQ(whole.steps("p"), 1);
  std::vector<Tensor> mine;
  for (const Tensor& b : whole.buffers("p")) mine.push_back(b.view({4}).slice0(1, 3).clone());
  half.load_param_state("p", whole.steps("p"), mine);
  EXPECT_EQ(half.steps("p"), 1);
  p2.value().copy_from(p1.value());
  for (auto* v : {&p1, &p2}) v->set_grad(Tensor::from_vector(kGrads[1], {2, 2}));
  whole.step();
  half.step();
  for (int64_t i = 1; i < 3; ++i) EXPECT_EQ(p1.value().to_vector()[i], p2.value().to_vector()[i]) << i;
  EXPECT_THAT([&] { half.load_param_state("p", 2, {}); }, ThrowsMessage<Error>(HasSubstr("got 0 buffers, expected 2")));
  EXPECT_THAT([&] { half.load_param_state("p", 2, {Tensor::zeros({4}), Tensor::zeros({4})}); },
              ThrowsMessage<Error>(HasSubstr("this rank owns 2")));
  EXPECT_THAT([&] { half.load_param_state("q", 0, {}); }, ThrowsMessage<Error>(HasSubstr("no parameter 'q'")));
  half.load_param_state("p", 0, {});  // never updated: no state
  EXPECT_EQ(half.state_bytes(), 0);
}

}  // namespace
}  // namespace artel::optim
