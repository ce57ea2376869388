// Data-parallel training of a model of your own (examples/common/spirals.h).
//
// Every worker holds the whole model and trains on its own rows of each
// global batch; DistributedDataParallel averages the gradients during
// backward, so every worker takes the step one worker would take on the whole
// batch. To show it, each worker also trains a whole copy on the global batch
// and compares weights at the end.   artel launch -n 2 -- ./data_parallel
#include <cstdio>

#include "../common/spirals.h"
#include "artel/comm/process_group.h"
#include "artel/optim/sgd.h"
#include "artel/parallel/distributed_data_parallel.h"

using namespace artel;
using autograd::Variable;

int main() try {
  // ARTEL_RANK, ARTEL_WORLD_SIZE and ARTEL_JOB_ID, as `artel launch` sets them.
  auto pg = comm::init_process_group(comm::group_options_from_env());
  const int kSteps = 200, kRows = 32, rank = pg->rank(), workers = pg->size();

  spirals::SpiralNet model;            // declared: shapes, no storage yet
  nn::materialize(model, /*seed=*/42);  // the same weights on every worker
  parallel::DistributedDataParallel ddp(model.named_parameters(), *pg, {});
  optim::Sgd opt(optim::one_group(model.named_parameters(), 0.05f), {.momentum = 0.9f});

  spirals::SpiralNet copy;  // the reference: one worker on the whole batch
  nn::materialize(copy, 42);
  optim::Sgd copy_opt(optim::one_group(copy.named_parameters(), 0.05f), {.momentum = 0.9f});

  Rng data(7);  // the same global batches everywhere; each worker trains on its rows
  for (int step = 0; step < kSteps; ++step) {
    auto [x, label] = spirals::batch(kRows * workers, data);
    model.zero_grad();
    Variable loss = autograd::cross_entropy(model.forward(x.slice0(rank * kRows, (rank + 1) * kRows)),
                                            label.slice0(rank * kRows, (rank + 1) * kRows));
    loss.backward();  // each bucket's all-reduce starts as soon as its gradients are ready
    ddp.finish();     // now every gradient is the average over the workers
    ddp.step(opt);

    copy_opt.zero_grad();
    Variable copy_loss = autograd::cross_entropy(copy.forward(x), label);
    copy_loss.backward();
    copy_opt.step();
    if (rank == 0 && (step % 50 == 0 || step == kSteps - 1))
      std::printf("step %3d  loss %.4f (this worker's rows)  %.4f (one worker, whole batch)\n", step, loss.item(),
                  copy_loss.item());
  }
  float err = 0;
  nn::StateDict whole = copy.state_dict();
  for (auto& [name, p] : model.named_parameters()) err = std::max(err, spirals::max_abs_diff(p.value(), whole.at(name)));
  return spirals::report_against_one_worker(*pg, err);
} catch (const Error& e) {
  std::fprintf(stderr, "error: %s\n", e.what());
  return 1;
}
