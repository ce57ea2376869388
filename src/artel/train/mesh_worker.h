// One worker of a DP × PP × TP job (`artel train --tp T --pp P
// --micro-batches M`): the process groups of its place in the mesh, the
// model shard it trains (model_mesh.h), and a Trainer that runs the usual loop
// with the mesh as its strategy (Note [Model-parallel seams] in strategy.h). Only rank 0 prints
// and writes files. After training rank 0 prints, per pipeline stage, the
// most micro-batches and activation bytes a stage held at once, and with
// --trace writes the timeline of every worker (Chrome trace) and, for
// pipelines, an SVG of stages × time with each stage's idle share next to
// the ideal bubble (P − 1)/(M + P − 1).
//
//   auto world = comm::init_process_group(comm::group_options_from_env({.backend = "shm"}));
//   MeshWorker w(cfg, {.out = &std::cout}, world);
//   w.run();
#pragma once

#include <memory>

#include "artel/comm/process_group.h"
#include "artel/train/model_mesh.h"
#include "artel/train/trainer.h"

namespace artel::train {

class MeshWorker {
 public:
  // Collective over `world`: builds the groups, the shard and the trainer;
  // `ddp` for data parallelism across the replicas.
  MeshWorker(TrainConfig cfg, RunOptions run, std::shared_ptr<comm::ProcessGroup> world, parallel::DdpOptions ddp = {});
  ~MeshWorker();

  RunSummary run();
  Trainer& trainer() { return *trainer_; }
  ModelMesh& mesh() { return *mesh_; }

 private:
  void report_stages();
  void write_trace();
  std::ostream& out() const;

  TrainConfig cfg_;
  RunOptions run_;
  std::shared_ptr<comm::ProcessGroup> world_;
  std::unique_ptr<ModelMesh> mesh_;
  std::unique_ptr<Trainer> trainer_;
};

}  // namespace artel::train
