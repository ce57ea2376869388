// ModelShard applies a model's own plan: a GPT split over T ranks-as-threads
// holds exactly the parts of the single worker's parameters, computes its
// loss and the parts of its gradients, and runs the single worker's ops plus
// the tensor-parallel collectives; plans that do not fit are named errors;
// pipeline stages hold the parameters of their pieces (a tied one on both).
#include "artel/parallel/model_shard.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <iostream>
#include <set>

#include "artel/autograd/ops.h"
#include "artel/core/memory_stats.h"
#include "artel/models/model.h"
#include "artel/nn/activations.h"
#include "artel/nn/linear.h"
#include "core/same_bits.h"
#include "parallel/parallel_testing.h"

namespace artel::parallel {
namespace {

using namespace parallel_testing;  // NOLINT: the helpers of parallel_testing.h
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

constexpr int64_t kB = 2, kT = 8, kV = 65;  // 65: divisible by neither 2 nor 4

models::ModelConfig gpt_config(int64_t n_head = 4, int64_t n_embd = 16) {
  models::ModelConfig c;
  c.vocab_size = kV, c.n_layer = 2, c.n_head = n_head, c.n_embd = n_embd, c.block_size = kT, c.seed = 11;
  return c;
}

Tensor token_ids(uint64_t seed) {
  Rng rng(seed);
  Tensor t = Tensor::empty({kB, kT}, DType::i64);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<int64_t>()[i] = static_cast<int64_t>(rng.below(kV));
  return t;
}

// One stage of every piece, split over `tp` (or checked against `degree` ranks without a group).
ShardPlace tp_place(comm::ProcessGroup* tp, int degree = 1) {
  ShardPlace p;
  p.tp = tp;
  p.tp_degree = degree;
  return p;
}

using artel_test::same_bits;

float max_abs_diff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  float d = 0;
  for (int64_t i = 0; i < a.numel() && a.shape() == b.shape(); ++i)
    d = std::max(d, std::abs(a.data<float>()[i] - b.data<float>()[i]));
  return d;
}

// The ops of the graph behind v, inputs before the op that uses them (depth
// first, in input order, each node once): the ops its forward ran.
void collect_ops(const std::shared_ptr<autograd::Node>& n, std::set<const autograd::Node*>& seen,
                 std::vector<std::string>& out) {
  if (!n || !seen.insert(n.get()).second) return;
  for (const Variable& in : n->inputs())
    if (in.defined()) collect_ops(in.grad_fn(), seen, out);
  out.emplace_back(n->name());
}

std::vector<std::string> ops_of(const Variable& v) {
  std::set<const autograd::Node*> seen;
  std::vector<std::string> out;
  collect_ops(v.grad_fn(), seen, out);
  return out;
}

bool is_communication(const std::string& op) {
  return op == "copy_to_tensor_parallel" || op == "reduce_from_tensor_parallel" || op == "once_over_tensor_parallel";
}

std::vector<std::string> without_communication(std::vector<std::string> ops) {
  std::erase_if(ops, is_communication);
  return ops;
}

std::string listed(const std::vector<std::string>& ops) {
  std::string s;
  for (const std::string& op : ops) s += (s.empty() ? "" : " ") + op;
  return s;
}

// The single worker: its parameters, logits, loss, gradients and forward ops.
struct Whole {
  std::map<std::string, Tensor> values, grads;
  Tensor logits;
  float loss = 0;
  std::vector<std::string> ops;
};

Whole run_whole(const models::ModelConfig& c, const Tensor& ids, const Tensor& targets) {
  auto m = models::make_model(c);
  Whole w;
  Variable logits = m->forward(ids);
  Variable loss = autograd::cross_entropy(logits, targets.view({-1}));
  loss.backward();
  w.ops = ops_of(logits);
  w.logits = logits.value();
  w.loss = loss.item();
  for (auto& [n, p] : m->named_parameters()) w.values[n] = p.value(), w.grads[n] = p.grad();
  return w;
}

// Config c's GPT split over 2 and 4 ranks (sequence-parallel or not)
// against the single worker on the same batch: the loss, the logits joined
// and every gradient part, within float rounding. `check` sees each rank's
// shard and logits before the loss.
void expect_gpt_in_parts(const models::ModelConfig& c, bool sequence_parallel,
                         const std::function<void(ModelShard&, const Whole&, const Variable&, int, int)>& check) {
  const Tensor ids = token_ids(1), targets = token_ids(2);
  const Whole whole = run_whole(c, ids, targets);
  for (int T : {2, 4}) {
    PerRank logits(T);
    spawn(T, [&](comm::ProcessGroup& pg) {
      const int r = pg.rank();
      const std::string at = " (rank " + std::to_string(r) + " of " + std::to_string(T) + ")";
      auto m = models::declare_model(c);
      ShardPlace place = tp_place(&pg);
      place.sequence_parallel = sequence_parallel;
      ModelShard shard(*m, place);
      shard.materialize(c.seed);
      nn::Activations out = shard.forward({Variable(ids)});
      ASSERT_EQ(out.size(), 1u);
      logits.put(r, out[0].value());
      check(shard, whole, out[0], r, T);
      Variable loss = shard.loss(out[0], targets);
      EXPECT_NEAR(loss.item(), whole.loss, 1e-5) << at;
      loss.backward();
      for (auto& [name, p] : shard.parameters()) {
        ASSERT_TRUE(p.grad().defined()) << name << at;
        EXPECT_LE(max_abs_diff(p.grad(), nn::take_part(whole.grads.at(name), shard.placement(name).split, r, T)), 1e-5f)
            << name << at;
      }
    });
    Tensor joined = nn::join_parts(logits.slots, {.dim = 2, .pad = true}, {kB, kT, kV});
    EXPECT_LE(max_abs_diff(joined, whole.logits), 1e-5f) << "logits over " << T;
  }
}

TEST(ModelShard, TensorParallelGptIsTheSingleWorkersModelInParts) {
  expect_gpt_in_parts(gpt_config(), false, [](ModelShard& shard, const Whole& whole, const Variable&, int r, int T) {
    const std::string at = " (rank " + std::to_string(r) + " of " + std::to_string(T) + ")";
    ASSERT_EQ(shard.parameters().size(), whole.values.size());  // one stage: all of them
    for (auto& [name, p] : shard.parameters())
      EXPECT_TRUE(same_bits(p.value(), nn::take_part(whole.values.at(name), shard.placement(name).split, r, T)))
          << name << at;
    const nn::NamedParameters mine = shard.parameters();
    ASSERT_EQ(mine.front().first, "transformer.wte.weight");
    EXPECT_EQ(mine.front().second.value().size(0), T == 2 ? 33 : 17);  // 65 rows padded to 66 or 68
  });
}

// The padding rows of the table (past row 65) get no gradient.
TEST(ModelShard, TheVocabularysPaddingRowsGetNoGradient) {
  const models::ModelConfig c = gpt_config();
  const Tensor ids = token_ids(1), targets = token_ids(2);
  for (int T : {2, 4})
    spawn(T, [&](comm::ProcessGroup& pg) {
      auto m = models::declare_model(c);
      ModelShard shard(*m, tp_place(&pg));
      shard.materialize(c.seed);
      shard.loss(shard.forward({Variable(ids)})[0], targets).backward();
      const nn::NamedParameters mine = shard.parameters();
      const auto& [name, wte] = mine.front();
      const nn::PartGeometry g = nn::part_geometry({kV, 16}, shard.placement(name).split, pg.rank(), T);
      for (int64_t i = g.valid() * 16; i < wte.grad().numel(); ++i)
        ASSERT_EQ(wte.grad().data<float>()[i], 0.0f) << "rank " << pg.rank() << " of " << T;
    });
}

// Sequence parallelism (Note [The sequence-parallel region] in
// model_shard.cpp): the blocks' stream split by tokens, with dropout on, so
// the masks too must be the single worker's. The same loss, logits and
// gradients, through a scatter into the blocks, a gather out of them, and a
// gather and a reduce-scatter around each column/row pair.
TEST(ModelShard, SequenceParallelGptIsTheSingleWorkersModelInParts) {
  models::ModelConfig c = gpt_config();
  c.dropout = 0.1f;
  expect_gpt_in_parts(c, true, [](ModelShard&, const Whole&, const Variable& logits, int r, int T) {
    const std::vector<std::string> ops = ops_of(logits);
    auto count = [&](const char* op) { return std::count(ops.begin(), ops.end(), op); };
    const std::string at = " (rank " + std::to_string(r) + " of " + std::to_string(T) + ")";
    EXPECT_EQ(count("scatter_to_sequence_parallel"), 1) << at;
    EXPECT_EQ(count("gather_from_sequence_parallel"), 2 * 2 + 1) << at;  // c_attn, c_fc of 2 blocks; the head
    EXPECT_EQ(count("reduce_scatter_to_sequence_parallel"), 2 * 2) << at;
  });
}

// Switched off (evaluation, sampling), the shard runs plain tensor
// parallelism: a prompt of any length, the same logits.
TEST(ModelShard, SequenceParallelSwitchedOffTakesAnyTokenCount) {
  const models::ModelConfig c = gpt_config();
  const Tensor ids = token_ids(1).slice0(0, 1).view({1, kT}).clone();
  Tensor three = Tensor::empty({1, 3}, DType::i64);
  for (int64_t t = 0; t < 3; ++t) three.data<int64_t>()[t] = ids.data<int64_t>()[t];
  auto m = models::make_model(c);
  nn::EvalMode eval(*m);
  const Tensor want = m->forward(three).value();
  spawn(2, [&](comm::ProcessGroup& pg) {
    auto shard_model = models::declare_model(c);
    ShardPlace place = tp_place(&pg);
    place.sequence_parallel = true;
    ModelShard shard(*shard_model, place);
    shard.materialize(c.seed);
    nn::EvalMode shard_eval(*shard_model);
    EXPECT_NE(error_of([&] { shard.forward({Variable(three)}); }).find("do not split over 2 ranks"), std::string::npos);
    shard.split_tokens(false);
    Tensor local = shard.forward({Variable(three)})[0].value();  // this rank's columns of the vocabulary
    Tensor row = Tensor::empty({1, 3, 2 * local.size(2)});
    pg.all_gather(local.view({3, local.size(2)}).clone(), row.view({2, 3, local.size(2)}))->wait();
    for (int64_t t = 0; t < 3; ++t)
      for (int64_t v = 0; v < kV; ++v) {
        const int64_t rank = v / local.size(2), col = v % local.size(2);
        ASSERT_NEAR(row.data<float>()[(rank * 3 + t) * local.size(2) + col], want.data<float>()[t * kV + v], 1e-5)
            << "token " << t << " column " << v;
      }
  });
}

// The same ops: a tensor-parallel rank runs the single worker's forward op
// for op, plus the collectives (Megatron's f and g, and once_over for the
// row-parallel addends on ranks other than 0).
TEST(ModelShard, ATensorParallelRankRunsTheSingleWorkersOpsPlusTheCollectives) {
  const models::ModelConfig c = gpt_config();
  const Tensor ids = token_ids(1), targets = token_ids(2);
  const Whole whole = run_whole(c, ids, targets);
  std::vector<std::vector<std::string>> ops(2), loss_ops(2);
  spawn(2, [&](comm::ProcessGroup& pg) {
    auto m = models::declare_model(c);
    ModelShard shard(*m, tp_place(&pg));
    shard.materialize(c.seed);
    Variable logits = shard.forward({Variable(ids)})[0];
    ops[pg.rank()] = ops_of(logits);
    loss_ops[pg.rank()] = ops_of(shard.loss(logits, targets));
  });
  std::cout << "single worker: " << listed(whole.ops) << "\n";
  for (int r = 0; r < 2; ++r) std::cout << "tp rank " << r << " of 2: " << listed(ops[r]) << "\n";
  const std::vector<std::string> block = {"layer_norm", "linear",      "causal_self_attention", "linear_add",
                                          "layer_norm", "linear_gelu", "linear_add"};
  std::vector<std::string> want = {"embedding", "embedding", "add"};
  for (int i = 0; i < 2; ++i) want.insert(want.end(), block.begin(), block.end());
  want.insert(want.end(), {"layer_norm", "linear"});
  EXPECT_EQ(whole.ops, want);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(without_communication(ops[r]), whole.ops) << "rank " << r;
    auto count = [&](const char* op) { return std::count(ops[r].begin(), ops[r].end(), op); };
    // f: before c_attn and c_fc of each block and the head's attend; g: after both c_proj and the lookup.
    EXPECT_EQ(count("copy_to_tensor_parallel"), 5) << "rank " << r;
    EXPECT_EQ(count("reduce_from_tensor_parallel"), 5) << "rank " << r;
    // The bias and the residual of both c_proj of both blocks enter the sums once: rank 0 adds them.
    EXPECT_EQ(count("once_over_tensor_parallel"), r == 0 ? 0 : 8) << "rank " << r;
    std::vector<std::string> want_loss = whole.ops;
    want_loss.emplace_back("vocab_parallel_cross_entropy");
    EXPECT_EQ(without_communication(loss_ops[r]), want_loss) << "rank " << r;
  }
}

// What backward keeps: with full recompute each block is one checkpoint node
// (the head shares wte with the embedding, so it is not recomputed); with
// selective only the attention core is.
TEST(ModelShard, RecomputeLeavesOnlyCheckpointsWhereItRecomputes) {
  auto m = models::make_model(gpt_config());
  const Tensor ids = token_ids(1);
  m->set_recompute(nn::Recompute::full);
  EXPECT_EQ(listed(ops_of(m->forward(ids))), "embedding embedding add checkpoint checkpoint layer_norm linear");
  m->set_recompute(nn::Recompute::selective);
  const std::string block = "layer_norm linear checkpoint linear_add layer_norm linear_gelu linear_add";
  EXPECT_EQ(listed(ops_of(m->forward(ids))), "embedding embedding add " + block + " " + block + " layer_norm linear");
  m->set_recompute(nn::Recompute::none);
  const std::vector<std::string> plain = ops_of(m->forward(ids));
  EXPECT_EQ(std::count(plain.begin(), plain.end(), "checkpoint"), 0);
}

// Tensor bytes allocated while the shards are made: exactly the ranks' parts,
// never a whole tensor first (the peak is what the shards hold).
TEST(ModelShard, EachWorkerAllocatesOnlyItsOwnPart) {
  const models::ModelConfig c = gpt_config();
  const int64_t whole_bytes = 4 * models::declare_model(c)->num_parameters();
  auto held_bytes = [](const ModelShard& s) {
    int64_t n = 0;
    for (auto& [name, p] : s.parameters()) n += 4 * p.numel();
    return n;
  };
  {  // stage 0 of 2, alone
    auto m = models::declare_model(c);
    const int64_t base = live_tensor_bytes();
    reset_peak_tensor_bytes();
    ModelShard shard(*m, {.stages = {{0, 2}, {2, 4}}, .stage = 0});
    shard.materialize(c.seed);
    EXPECT_EQ(live_tensor_bytes() - base, held_bytes(shard));
    EXPECT_EQ(peak_tensor_bytes() - base, held_bytes(shard));
    EXPECT_LT(held_bytes(shard), whole_bytes * 3 / 4);
  }
  // Two tensor-parallel ranks as threads (one process: the counters add up).
  const int64_t base = live_tensor_bytes();
  reset_peak_tensor_bytes();
  std::vector<int64_t> held(2);
  int64_t live = 0, peak = 0, replicated = 0;
  spawn(2, [&](comm::ProcessGroup& pg) {
    auto m = models::declare_model(c);
    ModelShard shard(*m, tp_place(&pg));
    shard.materialize(c.seed);
    held[pg.rank()] = held_bytes(shard);
    if (pg.rank() == 0)
      for (auto& [name, p] : shard.parameters()) replicated += shard.placement(name).split.replicated() ? 4 * p.numel() : 0;
    pg.barrier()->wait();
    if (pg.rank() == 0) live = live_tensor_bytes() - base, peak = peak_tensor_bytes() - base;
    pg.barrier()->wait();
  });
  // Both parts together: the whole model, the padding of wte (65 -> 66 rows),
  // and a second copy of what every rank holds whole (layer norms, biases summed once).
  EXPECT_EQ(held[0] + held[1], whole_bytes + 4 * c.n_embd + replicated);
  EXPECT_EQ(live, held[0] + held[1]);
  EXPECT_EQ(peak, held[0] + held[1]);
}

TEST(ModelShard, TensorParallelMlpGivesTheWholeLogitsOnEveryRank) {
  models::ModelConfig c;
  c.kind = "mlp";
  const Tensor x = randn({3, 784}, 4);
  auto whole = models::make_model(c);
  const Tensor want = whole->forward(x).value();
  spawn(2, [&](comm::ProcessGroup& pg) {
    auto m = models::declare_model(c);
    ModelShard shard(*m, tp_place(&pg));
    shard.materialize(c.seed);
    EXPECT_EQ(shard.parameters()[0].second.shape(), (Shape{256, 784}));  // net.0: half the outputs
    EXPECT_EQ(shard.parameters()[2].second.shape(), (Shape{512, 256}));  // net.2: half the inputs
    EXPECT_LE(max_abs_diff(shard.forward({Variable(x)})[0].value(), want), 1e-5f) << "rank " << pg.rank();
  });
}

TEST(ModelShard, LoadTakesThisRanksPartOfEachWholeTensor) {
  const models::ModelConfig c = gpt_config();
  auto whole = models::make_model(c);
  const nn::StateDict sd = whole->state_dict();
  spawn(2, [&](comm::ProcessGroup& pg) {
    auto m = models::declare_model(c);
    ModelShard shard(*m, tp_place(&pg));
    shard.load([&](const std::string& name) { return sd.at(name); });
    for (auto& [name, p] : shard.parameters())
      EXPECT_TRUE(same_bits(p.value(), nn::take_part(sd.at(name), shard.placement(name).split, pg.rank(), 2))) << name;
    EXPECT_THAT([&] { shard.load([](const std::string&) { return Tensor(); }); },
                ThrowsMessage<Error>(HasSubstr("loading transformer.wte.weight: got nothing")));
  });
}

TEST(ModelShard, ThePlanSetsEachParametersSplit) {
  auto m = models::declare_model(gpt_config());
  ModelShard s(*m, tp_place(nullptr, 4));
  auto split = [&](const std::string& name) { return s.placement("transformer." + name).split; };
  EXPECT_EQ(split("wte.weight"), (nn::Split{.dim = 0, .pad = true}));
  EXPECT_EQ(split("h.1.attn.c_attn.weight"), (nn::Split{.dim = 0, .groups = 3, .unit = 4}));
  EXPECT_EQ(split("h.1.attn.c_attn.bias"), (nn::Split{.dim = 0, .groups = 3, .unit = 4}));
  EXPECT_EQ(split("h.1.attn.c_proj.weight"), (nn::Split{.dim = 1, .unit = 4}));
  EXPECT_EQ(split("h.1.attn.c_proj.bias"), nn::Split{});
  EXPECT_EQ(split("h.0.mlp.c_fc.weight"), (nn::Split{.dim = 0}));
  EXPECT_EQ(split("h.0.mlp.c_fc.bias"), (nn::Split{.dim = 0}));
  EXPECT_EQ(split("h.0.mlp.c_proj.weight"), (nn::Split{.dim = 1}));
  for (const char* whole : {"wpe.weight", "h.0.ln_1.weight", "h.0.mlp.c_proj.bias", "ln_f.bias"})
    EXPECT_TRUE(split(whole).replicated()) << whole;
  EXPECT_EQ(s.placement("transformer.h.0.attn.c_attn.weight").shape, (Shape{48, 16}));
  EXPECT_THAT([&] { s.placement("transformer.nope"); }, ThrowsMessage<Error>(HasSubstr("no parameter transformer.nope")));
}

}  // namespace
}  // namespace artel::parallel
