// Tensor-parallel layers composed as Megatron composes them — an MLP, an
// attention block, a vocabulary-parallel language-model head — against the
// same computation with nn-style full weights: outputs on every rank, the
// input's gradient on every rank, and each full weight's gradient reassembled
// from the ranks' shards.
#include "artel/parallel/tensor_parallel_layers.h"

#include <gtest/gtest.h>

#include <string>

#include "artel/autograd/ops.h"
#include "artel/nn/linear.h"
#include "parallel/parallel_testing.h"

namespace artel::parallel {
namespace {

using namespace parallel_testing;  // NOLINT: the helpers of parallel_testing.h
using autograd::gelu;
using autograd::linear;

const int64_t kB = 2, kT = 3, kC = 8;

// sum(y · seed): a loss whose output gradient is `seed`, different per element.
Variable weighted_sum(const Variable& y, uint64_t seed) {
  return autograd::sum(autograd::mul(y, Variable(randn(y.shape(), seed))));
}

std::string at(const std::string& what, int world) { return what + ", world " + std::to_string(world); }

void fill(Variable v, const Tensor& t) { v.value().copy_from(t); }

TEST(TensorParallelLayers, ParametersAreNamedAsNnLinearsAndStartAtZero) {
  spawn(2, [&](comm::ProcessGroup& pg) {
    Rng rng(1);
    nn::Linear full(4, 6, true, rng);
    ColumnParallelLinear col(4, 6, true, pg);
    RowParallelLinear row(6, 4, true, pg);
    ASSERT_EQ(col.named_parameters().size(), full.named_parameters().size());
    for (size_t i = 0; i < col.named_parameters().size(); ++i) {
      EXPECT_EQ(col.named_parameters()[i].first, full.named_parameters()[i].first);
      EXPECT_EQ(row.named_parameters()[i].first, full.named_parameters()[i].first);
    }
    EXPECT_EQ(col.weight().shape(), (Shape{3, 4}));
    EXPECT_EQ(col.bias().shape(), (Shape{3}));
    EXPECT_EQ(col.out_start(), 3 * pg.rank());
    EXPECT_EQ(row.weight().shape(), (Shape{4, 3}));
    EXPECT_EQ(row.bias().shape(), (Shape{4}));
    EXPECT_EQ(row.in_start(), 3 * pg.rank());
    for (float v : col.weight().value().to_vector()) EXPECT_EQ(v, 0.0f);
    for (float v : row.bias().value().to_vector()) EXPECT_EQ(v, 0.0f);
    EXPECT_FALSE(ColumnParallelLinear(4, 6, false, pg).bias().defined());
    VocabParallelEmbedding wte(10, 3, pg);
    EXPECT_EQ(wte.named_parameters().front().first, "weight");
    EXPECT_EQ(wte.weight().shape(), (Shape{5, 3}));
    EXPECT_EQ(wte.vocab_start(), 5 * pg.rank());
  });
}

// (a) Megatron's MLP: column-parallel c_fc -> gelu -> row-parallel c_proj.
TEST(TensorParallelLayers, MegatronMlpMatchesTheFullMlp) {
  Tensor x = randn({kB, kT, kC}, 1);
  Tensor w1 = randn({4 * kC, kC}, 2, 0.3f), b1 = randn({4 * kC}, 3), w2 = randn({kC, 4 * kC}, 4, 0.2f),
         b2 = randn({kC}, 5);
  Variable xf(x.clone(), true), w1f(w1.clone(), true), b1f(b1.clone(), true), w2f(w2.clone(), true),
      b2f(b2.clone(), true);
  Variable yf = linear(gelu(linear(xf, w1f, b1f)), w2f, b2f);
  weighted_sum(yf, 6).backward();

  for (int world : {2, 4}) {
    PerRank gw1(world), gb1(world), gw2(world);
    spawn(world, [&](comm::ProcessGroup& pg) {
      int r = pg.rank();
      ColumnParallelLinear fc(kC, 4 * kC, true, pg);
      RowParallelLinear proj(4 * kC, kC, true, pg);
      fc.load_state_dict({{"weight", shard_of(w1, 0, r, world)}, {"bias", shard_of(b1, 0, r, world)}});
      proj.load_state_dict({{"weight", shard_of(w2, 1, r, world)}, {"bias", b2}});
      Variable xr(x.clone(), true);
      Variable y = proj.forward(gelu(fc.forward(xr)));
      expect_close(y.value(), yf.value(), at("y rank " + std::to_string(r), world));
      weighted_sum(y, 6).backward();
      expect_close(xr.grad(), xf.grad(), at("dx rank " + std::to_string(r), world));
      expect_close(proj.bias().grad(), b2f.grad(), at("d c_proj.bias rank " + std::to_string(r), world));
      gw1.put(r, fc.weight().grad());
      gb1.put(r, fc.bias().grad());
      gw2.put(r, proj.weight().grad());
    });
    expect_close(unshard(gw1.slots, 0), w1f.grad(), at("d c_fc.weight", world));
    expect_close(unshard(gb1.slots, 0), b1f.grad(), at("d c_fc.bias", world));
    expect_close(unshard(gw2.slots, 1), w2f.grad(), at("d c_proj.weight", world));
  }
}

// (b) Attention: c_attn's (3C, C) weight is [q; k; v]; rank r takes its heads'
// rows of each of the three, so its column output is [q_r | k_r | v_r] and it
// runs attention over its n_head/P heads; c_proj is row-parallel.
Tensor qkv_shard(const Tensor& w, int r, int world) {
  std::vector<Tensor> blocks;
  for (int j = 0; j < 3; ++j) blocks.push_back(shard_of(shard_of(w, 0, j, 3), 0, r, world));
  return unshard(blocks, 0);
}

// The inverse of qkv_shard over all ranks.
Tensor qkv_unshard(const std::vector<Tensor>& per_rank) {
  std::vector<Tensor> qkv;
  for (int j = 0; j < 3; ++j) {
    std::vector<Tensor> heads;
    for (const Tensor& t : per_rank) heads.push_back(shard_of(t, 0, j, 3));
    qkv.push_back(unshard(heads, 0));
  }
  return unshard(qkv, 0);
}

TEST(TensorParallelLayers, HeadParallelAttentionMatchesFullAttention) {
  const int64_t n_head = 4;
  Tensor x = randn({kB, kT, kC}, 11);
  Tensor wa = randn({3 * kC, kC}, 12, 0.4f), ba = randn({3 * kC}, 13), wp = randn({kC, kC}, 14, 0.3f),
         bp = randn({kC}, 15);
  Variable xf(x.clone(), true), waf(wa.clone(), true), baf(ba.clone(), true), wpf(wp.clone(), true),
      bpf(bp.clone(), true);
  Variable qkv_f = linear(xf, waf, baf);
  Variable yf = linear(autograd::causal_self_attention(qkv_f, n_head), wpf, bpf);
  weighted_sum(yf, 16).backward();

  for (int world : {2, 4}) {
    PerRank gwa(world), gba(world), gwp(world);
    spawn(world, [&](comm::ProcessGroup& pg) {
      int r = pg.rank();
      ColumnParallelLinear c_attn(kC, 3 * kC, true, pg);
      RowParallelLinear c_proj(kC, kC, true, pg);
      fill(c_attn.weight(), qkv_shard(wa, r, world));
      fill(c_attn.bias(), qkv_shard(ba.view({3 * kC, 1}), r, world).view({3 * kC / world}));
      fill(c_proj.weight(), shard_of(wp, 1, r, world));
      fill(c_proj.bias(), bp);
      Variable xr(x.clone(), true);
      Variable qkv = c_attn.forward(xr);  // (B, T, 3C/P): this rank's slice of the features
      Tensor full_qkv = qkv_f.value().view({kB * kT, 3 * kC});
      std::vector<Tensor> mine;  // this rank's columns of the full q, k and v
      for (int j = 0; j < 3; ++j) mine.push_back(shard_of(shard_of(full_qkv, 1, j, 3), 1, r, world));
      expect_close(qkv.value().view({kB * kT, 3 * kC / world}), unshard(mine, 1), at("qkv slice", world));
      Variable y = c_proj.forward(autograd::causal_self_attention(qkv, n_head / world));
      expect_close(y.value(), yf.value(), at("y rank " + std::to_string(r), world));
      weighted_sum(y, 16).backward();
      expect_close(xr.grad(), xf.grad(), at("dx rank " + std::to_string(r), world));
      expect_close(c_proj.bias().grad(), bpf.grad(), at("d c_proj.bias", world));
      gwa.put(r, c_attn.weight().grad());
      gba.put(r, c_attn.bias().grad().view({3 * kC / world, 1}));
      gwp.put(r, c_proj.weight().grad());
    });
    expect_close(qkv_unshard(gwa.slots), waf.grad(), at("d c_attn.weight", world));
    expect_close(qkv_unshard(gba.slots).view({3 * kC}), baf.grad(), at("d c_attn.bias", world));
    expect_close(unshard(gwp.slots, 1), wpf.grad(), at("d c_proj.weight", world));
  }
}

// A vocabulary-parallel language model's ends: wte -> lm_head -> loss, where
// neither the table nor the logits are ever whole on one rank.
TEST(TensorParallelLayers, VocabParallelEmbeddingHeadAndLossMatchTheFullModel) {
  const int64_t V = 16;
  Tensor ids = ids_tensor({3, 15, 8, 0, 3, 12}, {kB, kT});
  Tensor targets = ids_tensor({15, 8, -100, 3, 12, 7}, {kB, kT});
  Tensor wte = randn({V, kC}, 21), head = randn({V, kC}, 22, 0.5f);
  Variable wtef(wte.clone(), true), headf(head.clone(), true);
  Variable lf = autograd::cross_entropy(linear(autograd::embedding(wtef, ids), headf, Variable()), targets);
  lf.backward();

  for (int world : {2, 4}) {
    PerRank gwte(world), ghead(world);
    spawn(world, [&](comm::ProcessGroup& pg) {
      int r = pg.rank();
      VocabParallelEmbedding emb(V, kC, pg);
      ColumnParallelLinear lm_head(kC, V, false, pg);
      fill(emb.weight(), shard_of(wte, 0, r, world));
      fill(lm_head.weight(), shard_of(head, 0, r, world));
      Variable logits = lm_head.forward(emb.forward(ids));  // (B, T, V/P)
      Variable loss = vocab_parallel_cross_entropy(logits, targets, lm_head.out_start(), pg);
      EXPECT_NEAR(loss.item(), lf.item(), 1e-5f * std::abs(lf.item())) << at("loss", world);
      loss.backward();
      gwte.put(r, emb.weight().grad());
      ghead.put(r, lm_head.weight().grad());
    });
    expect_close(unshard(gwte.slots, 0), wtef.grad(), at("d wte.weight", world));
    expect_close(unshard(ghead.slots, 0), headf.grad(), at("d lm_head.weight", world));
  }
}

void expect_error(const std::function<void()>& fn, const std::vector<std::string>& needles) {
  try {
    fn();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    for (const auto& n : needles) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
  }
}

TEST(TensorParallelLayers, SizesNotDivisibleByTheGroupAreErrors) {
  spawn(4, [&](comm::ProcessGroup& pg) {
    expect_error([&] { ColumnParallelLinear(8, 10, true, pg); }, {"out_features 10", "4 ranks"});
    expect_error([&] { RowParallelLinear(6, 8, true, pg); }, {"in_features 6", "4 ranks"});
    expect_error([&] { VocabParallelEmbedding(50, 8, pg); }, {"num_embeddings 50", "4 ranks"});
  });
}

TEST(TensorParallelLayers, RowParallelInputMustBeThisRanksSlice) {
  spawn(2, [&](comm::ProcessGroup& pg) {
    RowParallelLinear row(8, 4, true, pg);
    expect_error([&] { row.forward(Variable(Tensor::zeros({2, 8}))); }, {"this rank's 4 of 8"});
  });
}

}  // namespace
}  // namespace artel::parallel
