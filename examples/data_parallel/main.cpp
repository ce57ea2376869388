// Data-parallel training of a model of your own, on artel's installed API.
//
// A small residual MLP learns which of two interleaved spirals a point lies
// on. Every worker holds the whole model and draws its own batches;
// DistributedDataParallel averages the gradients during backward, so every
// worker takes the same step. `artel launch` starts the workers and tells each
// its rank:   artel launch -n 2 -- ./data_parallel
#include <cmath>
#include <cstdio>
#include <memory>
#include <numbers>
#include <utility>

#include "artel/autograd/ops.h"
#include "artel/comm/process_group.h"
#include "artel/nn/linear.h"
#include "artel/nn/module.h"
#include "artel/optim/sgd.h"
#include "artel/parallel/distributed_data_parallel.h"

using namespace artel;
using autograd::Variable;

// x (B, 2) -> logits (B, 2), with a residual hidden layer. The layers declare
// their parameters; nn::materialize draws them from a seed.
class ResidualMlp : public nn::Module {
 public:
  ResidualMlp() {
    fc_in_ = register_module("fc_in", std::make_shared<nn::Linear>(2, 64));
    fc_mid_ = register_module("fc_mid", std::make_shared<nn::Linear>(64, 64));
    fc_out_ = register_module("fc_out", std::make_shared<nn::Linear>(64, 2));
  }
  Variable forward(const Variable& x) {
    Variable h = autograd::relu(fc_in_->forward(x));  // (B, 64)
    h = h + autograd::relu(fc_mid_->forward(h));      // (B, 64)
    return fc_out_->forward(h);                       // (B, 2)
  }

 private:
  std::shared_ptr<nn::Linear> fc_in_, fc_mid_, fc_out_;
};

// B noisy points of two spirals (1.5 turns each): x (B, 2), label (B) = which spiral.
std::pair<Tensor, Tensor> spiral_batch(int64_t B, Rng& rng) {
  Tensor x = Tensor::empty({B, 2}), label = Tensor::empty({B}, DType::i64);
  for (int64_t i = 0; i < B; ++i) {
    int64_t c = static_cast<int64_t>(rng.below(2));
    float t = rng.uniform(), angle = (3 * t + c) * std::numbers::pi_v<float>;
    x.data<float>()[2 * i] = t * std::cos(angle) + 0.03f * rng.normal();
    x.data<float>()[2 * i + 1] = t * std::sin(angle) + 0.03f * rng.normal();
    label.data<int64_t>()[i] = c;
  }
  return {x, label};
}

int main() try {
  // ARTEL_RANK, ARTEL_WORLD_SIZE and ARTEL_JOB_ID, as `artel launch` sets them.
  std::shared_ptr<comm::ProcessGroup> pg = comm::init_process_group(comm::group_options_from_env());
  ResidualMlp model;
  nn::materialize(model, /*seed=*/42);  // the same weights on every worker
  parallel::DistributedDataParallel ddp(model.named_parameters(), *pg, {});
  optim::Sgd opt(optim::one_group(model.named_parameters(), 0.05f), {.momentum = 0.9f});
  Rng data(7, 1 + pg->rank());  // each worker draws its own points

  const int kSteps = 400, kWindow = 25;
  float first = 0, last = 0;  // the mean loss of the first and of the last kWindow steps
  for (int step = 0; step < kSteps; ++step) {
    auto [x, label] = spiral_batch(64, data);
    model.zero_grad();
    Variable loss = autograd::cross_entropy(model.forward(Variable(x)), label);
    loss.backward();  // each bucket's all-reduce starts as soon as its gradients are ready
    ddp.finish();     // now every gradient is the average over the workers
    ddp.step(opt);
    if (step < kWindow) first += loss.item() / kWindow;
    if (step >= kSteps - kWindow) last += loss.item() / kWindow;
    if (step % 100 == 0 || step == kSteps - 1) std::printf("step %3d  loss %.4f\n", step, loss.item());
  }
  Tensor means = Tensor::from_vector({first, last}, {2});
  pg->all_reduce(means, {.op = comm::ReduceOp::avg})->wait();  // over the workers
  first = means.to_vector()[0], last = means.to_vector()[1];
  bool learned = last < first;
  if (pg->rank() == 0)
    std::printf("mean loss over %d workers: %.4f in the first %d steps, %.4f in the last %d: %s\n", pg->size(),
                first, kWindow, last, kWindow, learned ? "it went down" : "it did NOT go down");
  return learned ? 0 : 1;
} catch (const Error& e) {
  std::fprintf(stderr, "error: %s\n", e.what());
  return 1;
}
