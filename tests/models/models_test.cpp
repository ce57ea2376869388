#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <set>

#include "artel/autograd/ops.h"
#include "artel/models/cnn.h"
#include "artel/models/gpt.h"
#include "artel/models/mlp.h"
#include "artel/models/word_lm.h"
#include "artel/nn/embedding.h"
#include "artel/nn/safetensors.h"
#include "tiny_gpt.h"

namespace artel::models {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string error_of(const ModelConfig& c) {
  try {
    make_model(c);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

// A GPT with every parameter drawn from its config's seed.
std::unique_ptr<Gpt> make_gpt(const ModelConfig& c) {
  auto m = std::make_unique<Gpt>(c);
  nn::materialize(*m, c.seed);
  return m;
}

double std_of(const Tensor& t) {
  double s = 0, s2 = 0;
  for (float x : t.to_vector()) s += x, s2 += double(x) * x;
  double m = s / t.numel();
  return std::sqrt(s2 / t.numel() - m * m);
}

TEST(ModelConfig, BadConfigsAreErrors) {
  ModelConfig c;
  c.kind = "rnn";
  EXPECT_THAT(error_of(c), HasSubstr("unknown model 'rnn'"));
  c = ModelConfig{};
  c.n_embd = 130;
  EXPECT_THAT(error_of(c), HasSubstr("n_embd 130 is not divisible by n_head 4"));
  for (int64_t ModelConfig::*field : {&ModelConfig::vocab_size, &ModelConfig::n_layer, &ModelConfig::n_head,
                                      &ModelConfig::n_embd, &ModelConfig::block_size}) {
    c = ModelConfig{};
    c.*field = 0;
    EXPECT_THAT(error_of(c), HasSubstr("must be positive"));
  }
  c = ModelConfig{};
  c.dropout = 1.0f;
  EXPECT_THAT(error_of(c), HasSubstr("dropout"));
  c = ModelConfig{};
  c.kind = "mlp";
  c.n_layer = 0;  // GPT sizes do not matter to the MLP
  EXPECT_EQ(error_of(c), "no error");
}

TEST(Mlp, NamesCountAndForward) {
  ModelConfig c;
  c.kind = "mlp";
  auto m = make_model(c);
  std::vector<std::string> names;
  for (auto& [n, p] : m->named_parameters()) names.push_back(n);
  EXPECT_THAT(names, ElementsAre("net.0.weight", "net.0.bias", "net.2.weight", "net.2.bias", "net.4.weight", "net.4.bias"));
  EXPECT_EQ(m->num_parameters(), 669706);
  EXPECT_EQ(m->named_parameters()[0].second.shape(), (Shape{512, 784}));
  EXPECT_EQ(m->forward(Tensor::zeros({3, 784})).shape(), (Shape{3, 10}));
  EXPECT_THROW(m->forward(Tensor::zeros({3, 785})), Error);
  EXPECT_THROW(m->forward(Tensor::zeros({3, 784}, DType::f64)), Error);
}

TEST(WordLm, ItsBulkIsASparseTableAndItsForwardGivesWordLogits) {
  ModelConfig c;
  c.kind = "wordlm";
  c.vocab_size = 1000, c.n_layer = 1, c.n_head = 2, c.n_embd = 16, c.block_size = 8;
  auto m = make_model(c);
  std::vector<std::string> names;
  for (auto& [n, p] : m->named_parameters()) names.push_back(n);
  EXPECT_EQ(names.front(), "embed.weight");
  EXPECT_EQ(names.back(), "out.bias");
  // table 1000·16, positions 8·16, one block 12·16² + 13·16, ln_f 32, proj 16·32, out 32·1000 + 1000
  EXPECT_EQ(m->num_parameters(), 16000 + 128 + 3072 + 208 + 32 + 512 + 33000);
  int sparse = 0;
  for (auto& [path, module] : m->named_modules())
    if (auto* e = dynamic_cast<nn::Embedding*>(module); e && e->sparse()) {
      ++sparse;
      EXPECT_EQ(path, "embed");
    }
  EXPECT_EQ(sparse, 1);
  Tensor ids = Tensor::zeros({2, 5}, DType::i64);
  EXPECT_EQ(m->forward(ids).shape(), (Shape{2, 5, 1000}));
  EXPECT_THROW(m->forward(Tensor::zeros({2, 9}, DType::i64)), Error);  // longer than block_size
  EXPECT_THROW(m->forward(Tensor::zeros({2, 5})), Error);              // floats, not ids
  // Selective recomputation reruns its block's attention core, as the GPT's
  // (was: set on the GPT alone, so --recompute selective did nothing here).
  auto checkpoints = [&] {
    int n = 0;
    const Variable logits = m->forward(ids);  // holds the graph while it is walked
    std::vector<std::shared_ptr<autograd::Node>> todo = {logits.grad_fn()};
    std::set<const autograd::Node*> seen;
    while (!todo.empty()) {
      std::shared_ptr<autograd::Node> node = todo.back();
      todo.pop_back();
      if (!node || !seen.insert(node.get()).second) continue;
      n += std::string(node->name()) == "checkpoint";
      for (const Variable& in : node->inputs())
        if (in.defined()) todo.push_back(in.grad_fn());
    }
    return n;
  };
  EXPECT_EQ(checkpoints(), 0);
  m->set_recompute(nn::Recompute::selective);
  EXPECT_EQ(checkpoints(), 1);  // one block, one core
  m->set_recompute(nn::Recompute::none);
  EXPECT_EQ(checkpoints(), 0);
}

TEST(Cnn, NamesCountAndForward) {
  ModelConfig c;
  c.kind = "cnn";
  auto m = make_model(c);
  std::vector<std::string> names;
  for (auto& [n, p] : m->named_parameters()) names.push_back(n);
  EXPECT_THAT(names, ElementsAre("net.0.weight", "net.0.bias", "net.3.weight", "net.3.bias", "net.7.weight", "net.7.bias",
                                 "net.9.weight", "net.9.bias", "net.11.weight", "net.11.bias"));
  EXPECT_EQ(m->num_parameters(), 61706);
  EXPECT_EQ(m->forward(Tensor::zeros({2, 784})).shape(), (Shape{2, 10}));
  EXPECT_EQ(m->forward(Tensor::zeros({2, 1, 28, 28})).shape(), (Shape{2, 10}));
  EXPECT_THROW(m->forward(Tensor::zeros({2, 3, 28, 28})), Error);
}

TEST(Gpt, W2HasNanoGptNamesShapesAndParameterCount) {
  auto m = make_model(ModelConfig{});  // W2
  EXPECT_EQ(m->num_parameters(), 809856);
  auto named = m->named_parameters();
  std::vector<std::string> first;
  for (size_t i = 0; i < 15; ++i) first.push_back(named[i].first);
  EXPECT_THAT(first, ElementsAre("transformer.wte.weight", "transformer.wpe.weight", "transformer.h.0.ln_1.weight",
                                 "transformer.h.0.ln_1.bias", "transformer.h.0.attn.c_attn.weight",
                                 "transformer.h.0.attn.c_attn.bias", "transformer.h.0.attn.c_proj.weight",
                                 "transformer.h.0.attn.c_proj.bias", "transformer.h.0.ln_2.weight",
                                 "transformer.h.0.ln_2.bias", "transformer.h.0.mlp.c_fc.weight",
                                 "transformer.h.0.mlp.c_fc.bias", "transformer.h.0.mlp.c_proj.weight",
                                 "transformer.h.0.mlp.c_proj.bias", "transformer.h.1.ln_1.weight"));
  EXPECT_EQ(named.size(), 2 + 4 * 12 + 2u);
  EXPECT_EQ(named.back().first, "transformer.ln_f.bias");
  auto sd = m->state_dict();
  EXPECT_EQ(sd.at("transformer.wte.weight").shape(), (Shape{65, 128}));
  EXPECT_EQ(sd.at("transformer.wpe.weight").shape(), (Shape{64, 128}));
  EXPECT_EQ(sd.at("transformer.h.3.attn.c_attn.weight").shape(), (Shape{384, 128}));
  EXPECT_EQ(sd.at("transformer.h.3.mlp.c_fc.weight").shape(), (Shape{512, 128}));
  EXPECT_EQ(sd.at("transformer.h.3.mlp.c_proj.weight").shape(), (Shape{128, 512}));
  EXPECT_FALSE(sd.count("lm_head.weight"));  // tied: written once
  EXPECT_EQ(m->aliases().at("lm_head.weight"), "transformer.wte.weight");
}

TEST(Gpt, InitFollowsNanoGpt) {
  auto m = make_model(ModelConfig{});
  auto sd = m->state_dict();
  EXPECT_NEAR(std_of(sd.at("transformer.wte.weight")), 0.02, 0.001);
  EXPECT_NEAR(std_of(sd.at("transformer.h.0.attn.c_attn.weight")), 0.02, 0.0005);
  EXPECT_NEAR(std_of(sd.at("transformer.h.2.mlp.c_fc.weight")), 0.02, 0.0005);
  const double resid = 0.02 / std::sqrt(8.0);
  EXPECT_NEAR(std_of(sd.at("transformer.h.1.attn.c_proj.weight")), resid, 0.0003);
  EXPECT_NEAR(std_of(sd.at("transformer.h.3.mlp.c_proj.weight")), resid, 0.0002);
  for (const char* zero : {"transformer.h.0.attn.c_attn.bias", "transformer.h.3.mlp.c_proj.bias", "transformer.ln_f.bias"})
    for (float v : sd.at(zero).to_vector()) ASSERT_EQ(v, 0.0f) << zero;
  for (float v : sd.at("transformer.h.2.ln_1.weight").to_vector()) ASSERT_EQ(v, 1.0f);
  // Same seed, same model; another seed, another.
  auto again = make_model(ModelConfig{});
  EXPECT_EQ(again->state_dict().at("transformer.wpe.weight").to_vector(), sd.at("transformer.wpe.weight").to_vector());
  ModelConfig other;
  other.seed = 1;
  EXPECT_NE(make_model(other)->state_dict().at("transformer.wpe.weight").to_vector(),
            sd.at("transformer.wpe.weight").to_vector());
}

TEST(Gpt, ForwardShapeAndCausality) {
  auto gpt = make_gpt(tiny_gpt());
  Gpt& m = *gpt;
  std::vector<int64_t> a = {1, 2, 3, 4, 5, 6, 7, 8, 0, 1, 2, 3, 4, 5, 6, 7};
  std::vector<int64_t> b = a;
  b[4] = 10;  // change batch row 0 at t = 4
  Tensor la = m.forward(ids_of(a, 2, 8)).value(), lb = m.forward(ids_of(b, 2, 8)).value();
  ASSERT_EQ(la.shape(), (Shape{2, 8, 11}));
  std::vector<float> va = la.to_vector(), vb = lb.to_vector();
  for (int64_t t = 0; t < 8; ++t) {
    bool same = std::equal(va.begin() + t * 11, va.begin() + (t + 1) * 11, vb.begin() + t * 11);
    EXPECT_EQ(same, t < 4) << "position " << t;  // the past never sees the future
  }
  EXPECT_TRUE(std::equal(va.begin() + 88, va.end(), vb.begin() + 88));  // the other row is untouched
  // Shorter sequences and int32 ids give the same logits.
  Tensor ids32 = Tensor::empty({1, 3}, DType::i32);
  for (int i = 0; i < 3; ++i) ids32.data<int32_t>()[i] = static_cast<int32_t>(a[i]);
  std::vector<float> short32 = m.forward(ids32).value().to_vector();
  for (int i = 0; i < 33; ++i) EXPECT_NEAR(short32[i], va[i], 1e-5f);
}

TEST(Gpt, BadInputsAreErrors) {
  auto gpt = make_gpt(tiny_gpt());
  Gpt& m = *gpt;
  EXPECT_THAT([&] { m.forward(Tensor::zeros({1, 9}, DType::i64)); }, ::testing::ThrowsMessage<Error>(HasSubstr("exceeds block_size 8")));
  EXPECT_THROW(m.forward(Tensor::zeros({1, 4})), Error);          // f32 ids
  EXPECT_THROW(m.forward(Tensor::zeros({4}, DType::i64)), Error);  // no batch dim
  EXPECT_THROW(m.forward(ids_of({1, 11}, 1, 2)), Error);          // id outside the vocabulary
}

TEST(Gpt, GradientsReachEveryParameterAndTheTiedEmbeddingTwice) {
  auto gpt = make_gpt(tiny_gpt());
  Gpt& m = *gpt;
  Tensor ids = ids_of({1, 2, 3, 4, 5, 6, 7, 8}, 1, 8);
  Tensor targets = ids_of({2, 3, 4, 5, 6, 7, 8, 9}, 1, 8).view({8});
  Variable loss = autograd::cross_entropy(m.forward(ids), targets);
  loss.backward();
  for (auto& [n, p] : m.named_parameters()) EXPECT_TRUE(p.grad().defined()) << n;
  // Rows of wte for tokens never seen as input still get a gradient from the lm_head use.
  const Tensor& g = m.named_parameters()[0].second.grad();
  float row10 = 0;
  for (int j = 0; j < 16; ++j) row10 += std::fabs(g.data<float>()[10 * 16 + j]);
  EXPECT_GT(row10, 0.0f);
  // A few plain gradient steps lower the loss on this batch.
  float first = loss.item();
  for (int s = 0; s < 20; ++s) {
    m.zero_grad();
    Variable l = autograd::cross_entropy(m.forward(ids), targets);
    l.backward();
    autograd::NoGradGuard ng;
    for (auto& p : m.parameters()) {
      float* w = p.value().data<float>();
      const float* d = p.grad().data<float>();
      for (int64_t i = 0; i < p.numel(); ++i) w[i] -= 0.5f * d[i];
    }
  }
  EXPECT_LT(autograd::cross_entropy(m.forward(ids), targets).item(), 0.5f * first);
}

TEST(Gpt, DropoutOnlyInTrainingMode) {
  ModelConfig c = tiny_gpt();
  c.dropout = 0.2f;
  auto gpt = make_gpt(c);
  Gpt& m = *gpt;
  Tensor ids = ids_of({1, 2, 3, 4}, 1, 4);
  EXPECT_NE(m.forward(ids).value().to_vector(), m.forward(ids).value().to_vector());
  m.eval();
  EXPECT_EQ(m.forward(ids).value().to_vector(), m.forward(ids).value().to_vector());
  // The dropout stream is the model's and can be rewound.
  m.train();
  RngState s = m.dropout_rng()->state();
  std::vector<float> first = m.forward(ids).value().to_vector();
  m.dropout_rng()->set_state(s);
  EXPECT_EQ(m.forward(ids).value().to_vector(), first);
}

// forward_onto(r, x) is r + forward(x): fused into c_proj when dropout is
// inactive, the plain sum (same dropout draws) when it is active.
TEST(GptBlock, ForwardOntoIsTheResidualPlusTheForward) {
  Rng data(3, 0);
  Tensor x = Tensor::empty({2, 4, 16}), r = Tensor::empty({2, 4, 16});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = data.normal(), r.data<float>()[i] = data.normal();
  // Nonzero biases, so the residual and the bias both show.
  const BlockInit init{.std = 0.3f, .residual_std = 0.3f};
  for (float p : {0.0f, 0.3f}) {
    auto drop = std::make_shared<Rng>(5, 1);
    CausalSelfAttention attn(16, 2, p, init, drop);
    GptMlp mlp(16, p, init, drop);
    nn::materialize(attn, 3);
    nn::materialize(mlp, 4);
    for (auto& [n, v] : mlp.named_parameters()) nn::init::normal(v.value(), 0.0f, 0.3f, data);
    for (nn::Layer* layer : {static_cast<nn::Layer*>(&attn), static_cast<nn::Layer*>(&mlp)}) {
      RngState s = drop->state();
      std::vector<float> plain = autograd::add(Variable(r), layer->forward(Variable(x))).value().to_vector();
      drop->set_state(s);
      std::vector<float> fused = layer == &attn ? attn.forward_onto(Variable(r), Variable(x)).value().to_vector()
                                                : mlp.forward_onto(Variable(r), Variable(x)).value().to_vector();
      ASSERT_EQ(fused.size(), plain.size());
      for (size_t i = 0; i < fused.size(); ++i) EXPECT_NEAR(fused[i], plain[i], 1e-5) << "p " << p << " element " << i;
    }
  }
}

TEST(Gpt, GenerateSamplesReproduciblyAndCropsToTheBlock) {
  auto gpt = make_gpt(tiny_gpt());
  Gpt& m = *gpt;
  Rng r1(3), r2(3);
  std::vector<int64_t> prompt = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};  // longer than the block: cropped
  auto a = m.generate(prompt, 12, 1.0f, 0, r1);
  auto b = m.generate(prompt, 12, 1.0f, 0, r2);
  EXPECT_EQ(a, b);
  ASSERT_EQ(a.size(), 22u);
  EXPECT_TRUE(std::equal(prompt.begin(), prompt.end(), a.begin()));
  for (int64_t t : a) EXPECT_TRUE(t >= 0 && t < 11);
  EXPECT_TRUE(m.is_training());  // mode restored
  // top_k = 1 is greedy: the argmax of the last logits.
  Rng r3(5);
  auto greedy = m.generate({3}, 1, 0.7f, 1, r3);
  std::vector<float> logits = m.forward(ids_of({3}, 1, 1)).value().to_vector();
  EXPECT_EQ(greedy[1], std::max_element(logits.begin(), logits.end()) - logits.begin());
  EXPECT_THROW(m.generate({}, 1, 1.0f, 0, r3), Error);
  EXPECT_THROW(m.generate({11}, 1, 1.0f, 0, r3), Error);
  EXPECT_THROW(m.generate({1}, 1, 0.0f, 0, r3), Error);
  // A subnormal temperature overflowed the logits to inf and sampled token 0 every time.
  EXPECT_THAT([&] { m.generate({3}, 1, 1e-45f, 1, r3); },
              ::testing::ThrowsMessage<Error>(HasSubstr("is too small: a logit divided by it is past float32's range")));
  // NaN weights give NaN logits: refused, not sampled as if they were a model's.
  for (auto& [name, v] : m.named_parameters())
    if (name == "transformer.ln_f.weight") v.value().data<float>()[0] = std::nanf("");
  try {
    m.generate({1, 2}, 3, 1.0f, 0, r3);
    ADD_FAILURE() << "NaN logits were sampled";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("of token 1 is nan, not a finite number"));
  }
}

TEST(Gpt, WeightsRoundTripThroughSafetensorsWithOrWithoutLmHead) {
  namespace fs = std::filesystem;
  std::string dir = (fs::temp_directory_path() / ("artel_gpt_" + std::to_string(::getpid()))).string();
  fs::create_directories(dir);
  auto a_ = make_gpt(tiny_gpt());
  ModelConfig other = tiny_gpt();
  other.seed = 99;
  auto b_ = make_gpt(other);
  Gpt &a = *a_, &b = *b_;
  ASSERT_NE(a.state_dict().at("transformer.wte.weight").to_vector(),
            b.state_dict().at("transformer.wte.weight").to_vector());
  std::string p = dir + "/w.safetensors";
  nn::save_weights(a, p);
  nn::load_weights(b, p);
  Tensor ids = ids_of({1, 2, 3}, 1, 3);
  EXPECT_EQ(a.forward(ids).value().to_vector(), b.forward(ids).value().to_vector());
  // A PyTorch nanoGPT state_dict has lm_head.weight too: accepted when identical.
  nn::SafetensorsFile f = nn::read_safetensors(p);
  f.tensors["lm_head.weight"] = f.tensors.at("transformer.wte.weight").clone();
  nn::write_safetensors(p, f.tensors);
  EXPECT_NO_THROW(nn::load_weights(b, p));
  // A wrong size names the file and the tensor.
  ModelConfig wide = tiny_gpt();
  wide.n_embd = 32;
  Gpt c(wide);  // declared only: loading gives it storage, or names what does not fit
  EXPECT_THAT([&] { nn::load_weights(c, p); },
              ::testing::ThrowsMessage<Error>(AllOf(HasSubstr(p), HasSubstr("transformer.wte.weight (given float32 [11, 16]"))));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace artel::models
