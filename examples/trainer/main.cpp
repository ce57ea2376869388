// A model and data of your own through artel's training loop (train::Trainer).
//
// The loop — steps, evaluation, metrics.jsonl, checkpoints, weights files,
// progress — is artel's; how it is parallelised is the train::Strategy given
// to it. Here two workers train SpiralNet (examples/common/spirals.h) as two
// pipeline stages with train::ModelMesh; the same lines with
// DataParallelStrategy train it data-parallel. To show the layout changes
// nothing, each worker then trains it alone (no strategy) and compares.
//   artel launch -n 2 -- ./trainer
#include <cstdio>
#include <sstream>

#include "../common/spirals.h"
#include "artel/comm/process_group.h"
#include "artel/data/dataset.h"
#include "artel/parallel/mesh_groups.h"
#include "artel/train/model_mesh.h"
#include "artel/train/trainer.h"

using namespace artel;

// Train and validation points, the same on every worker (drawn from one seed).
std::unique_ptr<data::Dataset> spiral_data() {
  Rng rng(7);
  auto [train_x, train_y] = spirals::batch(2048, rng);
  auto [val_x, val_y] = spirals::batch(512, rng);
  return std::make_unique<data::TensorDataset>(train_x, train_y, val_x, val_y, /*classes=*/2, "two spirals");
}

int main() try {
  auto world = comm::init_process_group(comm::group_options_from_env());
  train::TrainConfig cfg;
  cfg.model = "spiralnet", cfg.out = "runs/spiralnet", cfg.seed = 42, cfg.threads = 1;
  cfg.steps = 200, cfg.batch_size = 64, cfg.data_order = "sequential", cfg.eval_every = 100;
  cfg.optimizer = "sgd", cfg.lr = 0.05, cfg.momentum = 0.9, cfg.weight_decay = 0;
  cfg.pp = 2, cfg.micro_batches = 4;  // the pieces in 2 stages, 1F1B over 4 micro-batches

  train::ModelMesh mesh(cfg, parallel::make_mesh_groups(world, /*pp=*/2, /*tp=*/1));
  train::Trainer trainer(cfg, std::make_unique<spirals::SpiralNet>(), spiral_data(), {}, &mesh);
  trainer.run();  // rank 0 prints progress and writes runs/spiralnet/

  // The same run on this worker alone: the default strategy, no micro-batches.
  train::TrainConfig alone = cfg;
  alone.pp = 1, alone.micro_batches = 1;
  std::ostringstream quiet;
  train::Trainer one(alone, std::make_unique<spirals::SpiralNet>(), spiral_data(),
                     {.out = &quiet, .write_files = false, .evaluate = false});
  one.run();
  nn::StateDict whole = one.model().state_dict();
  float err = 0;
  for (auto& [name, p] : mesh.parameters()) err = std::max(err, spirals::max_abs_diff(p.value(), whole.at(name)));
  return spirals::report_against_one_worker(*world, err);
} catch (const Error& e) {
  std::fprintf(stderr, "error: %s\n", e.what());
  return 1;
}
