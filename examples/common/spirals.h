// What the examples share: a model of the user's own and its data.
//
// SpiralNet learns which of two interleaved spirals a point lies on. It is
// written once, as single-worker code, and each example trains it under
// another strategy: data_parallel wraps it whole, pipeline cuts its pieces
// into stages, tensor_parallel splits its block as the plan declares.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <numbers>
#include <utility>

#include "artel/autograd/ops.h"
#include "artel/comm/process_group.h"
#include "artel/core/rng.h"
#include "artel/nn/linear.h"
#include "artel/nn/model.h"

namespace spirals {

using artel::Tensor;
using artel::autograd::Variable;

// A block of the user's own: y = x + W2·relu(W1·x), the residual laid into
// W2's product. Nothing here knows about parallelism.
class FeedForward : public artel::nn::Layer {
 public:
  FeedForward(int64_t dim, int64_t hidden) {
    w1_ = register_module("w1", std::make_shared<artel::nn::Linear>(dim, hidden));
    w2_ = register_module("w2", std::make_shared<artel::nn::Linear>(hidden, dim));
  }
  Variable forward(const Variable& x) override {
    return w2_->forward_onto(x, artel::autograd::relu(w1_->forward(x)));
  }

 private:
  std::shared_ptr<artel::nn::Linear> w1_, w2_;
};

// x (B, 2) -> logits (B, 2): a projection in, the block, a head. The plan
// says how it splits: the pieces, in order, are where a pipeline may cut;
// W1 column-parallel and W2 row-parallel is Megatron's MLP (one all-reduce
// forward, one backward).
class SpiralNet : public artel::nn::Model {
 public:
  SpiralNet() {
    in_ = register_module("in", std::make_shared<artel::nn::Linear>(2, 32));
    block_ = register_module("block", std::make_shared<FeedForward>(32, 128));
    head_ = register_module("head", std::make_shared<artel::nn::Linear>(32, 2));
    auto in = [this](const artel::nn::Activations& a) {
      return artel::nn::Activations{artel::autograd::relu(in_->forward(a[0]))};
    };
    artel::nn::ParallelPlan plan;
    plan.pieces = {{.name = "in", .modules = {"in"}, .forward = in}, artel::nn::layer_piece("block", *block_),
                   artel::nn::layer_piece("head", *head_)};
    plan.tensor_parallel = {{"block.w1", artel::nn::TensorParallelStyle::column},
                            {"block.w2", artel::nn::TensorParallelStyle::row}};
    set_plan(std::move(plan));
  }

 private:
  std::shared_ptr<artel::nn::Linear> in_, head_;
  std::shared_ptr<FeedForward> block_;
};

// B noisy points of two spirals (1.5 turns each): x (B, 2), label (B) = which spiral.
inline std::pair<Tensor, Tensor> batch(int64_t B, artel::Rng& rng) {
  Tensor x = Tensor::empty({B, 2}), label = Tensor::empty({B}, artel::DType::i64);
  for (int64_t i = 0; i < B; ++i) {
    int64_t c = static_cast<int64_t>(rng.below(2));
    float t = rng.uniform(), angle = (3 * t + c) * std::numbers::pi_v<float>;
    x.data<float>()[2 * i] = t * std::cos(angle) + 0.03f * rng.normal();
    x.data<float>()[2 * i + 1] = t * std::sin(angle) + 0.03f * rng.normal();
    label.data<int64_t>()[i] = c;
  }
  return {x, label};
}

inline float max_abs_diff(const Tensor& a, const Tensor& b) {
  float d = 0;
  for (int64_t i = 0; i < a.numel(); ++i) d = std::max(d, std::abs(a.data<float>()[i] - b.data<float>()[i]));
  return d;
}

// The largest differences over the workers, printed by rank 0 -> the exit
// status: 0 when within 1e-5. A loss difference below 0 is not reported.
inline int report_against_one_worker(artel::comm::ProcessGroup& world, float weight_err, float loss_err = -1) {
  Tensor errs = Tensor::from_vector({weight_err, loss_err}, {2});
  world.all_reduce(errs, {.op = artel::comm::ReduceOp::max})->wait();
  weight_err = errs.data<float>()[0], loss_err = errs.data<float>()[1];
  if (world.rank() == 0) {
    if (loss_err >= 0) std::printf("max relative loss difference vs one worker: %.3g\n", loss_err);
    std::printf("max |weight difference| vs one worker: %.3g\n", weight_err);
  }
  return weight_err <= 1e-5f && loss_err <= 1e-5f ? 0 : 1;
}

}  // namespace spirals
