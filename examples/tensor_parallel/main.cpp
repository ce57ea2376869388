// Tensor-parallel training of a block of your own, checked against one worker.
//
// The block of examples/common/spirals.h, y = x + W2·relu(W1·x), is plain
// single-worker code. Its model's plan declares W1 column-parallel (each worker computes half of
// the hidden features) and W2 row-parallel (each multiplies its half, and the
// partial sums are added over the workers): Megatron's MLP, with one
// all-reduce forward and one backward, and nothing in the block itself knows.
// Every worker also trains a whole copy alone and compares losses and weights.
//   artel launch -n 2 -- ./tensor_parallel
#include <cstdio>

#include "../common/spirals.h"
#include "artel/comm/process_group.h"
#include "artel/optim/sgd.h"
#include "artel/parallel/mesh_groups.h"
#include "artel/parallel/model_shard.h"

using namespace artel;
using autograd::Variable;

int main() try {
  auto world = comm::init_process_group(comm::group_options_from_env());
  parallel::MeshGroups groups = parallel::make_mesh_groups(world, /*pp=*/1, /*tp=*/2);
  const int kSteps = 200, kBatch = 64;
  const uint64_t seed = 42;

  // The plan applied: W1's rows and W2's columns split over the tp group.
  spirals::SpiralNet model;  // declared, no storage yet
  parallel::ModelShard shard(model, {.stages = {}, .tp = groups.tp.get()});  // no stages: one
  shard.materialize(seed);  // draws only this worker's halves
  optim::Sgd opt(optim::one_group(shard.parameters(), 0.05f), {.momentum = 0.9f});
  for (auto& [name, p] : shard.parameters())
    if (world->rank() == 0 && !shard.placement(name).split.replicated())
      std::printf("%-15s whole %s, this worker's part %s\n", name.c_str(), shape_str(shard.placement(name).shape).c_str(),
                  shape_str(p.shape()).c_str());

  // The reference: the whole model on this worker alone, drawn from the same seed.
  spirals::SpiralNet copy;
  nn::materialize(copy, seed);
  optim::Sgd copy_opt(optim::one_group(copy.named_parameters(), 0.05f), {.momentum = 0.9f});

  Rng data(7);  // the same batch on every worker: tensor parallelism splits the model, not the data
  float loss_err = 0, first = 0, last = 0;
  for (int step = 0; step < kSteps; ++step) {
    auto [x, label] = spirals::batch(kBatch, data);
    opt.zero_grad();
    Variable loss = shard.loss(shard.forward({Variable(x)})[0], label);
    loss.backward();  // the all-reduces of W1's input gradient run here
    opt.step();

    copy_opt.zero_grad();
    Variable copy_loss = autograd::cross_entropy(copy.forward(x), label);
    copy_loss.backward();
    copy_opt.step();

    loss_err = std::max(loss_err, std::abs(loss.item() - copy_loss.item()) / std::abs(copy_loss.item()));
    if (world->rank() == 0 && (step % 50 == 0 || step == kSteps - 1))
      std::printf("step %3d  loss %.5f (tensor parallel)  %.5f (one worker)\n", step, loss.item(), copy_loss.item());
    if (step == 0) first = loss.item();
    last = loss.item();
  }
  // Each worker's parts against the matching parts of the copy.
  nn::StateDict whole = copy.state_dict();
  float weight_err = 0;
  for (auto& [name, p] : shard.parameters())
    weight_err = std::max(weight_err, spirals::max_abs_diff(p.value(), nn::take_part(whole.at(name), shard.placement(name).split,
                                                                             shard.tp_rank(), shard.tp_size())));
  return spirals::report_against_one_worker(*world, weight_err, loss_err) == 0 && last < first ? 0 : 1;
} catch (const Error& e) {
  std::fprintf(stderr, "error: %s\n", e.what());
  return 1;
}
