// An `artel train` run as the planner sees it (plan/), and the check that
// `artel train` runs before any worker starts: a layout plan::predict_memory
// says does not fit in the memory a worker has is refused, with the
// planner's numbers, unless --no-memory-check.
//
// The model is the one `artel train` builds, as `artel plan --model` sees
// it: a GPT from its shape (its vocabulary the data's as the run reads it,
// padded as the run pads it: train::model_vocab); the MLP, the CNN and the
// word LM from their measured costs (measured_model, untimed). A
// parameter-server job's workers and its largest server are checked as
// plan/parameter_server_memory.h predicts them. Not checked, and started
// as before: a layout the planner cannot model (validate_layout refuses it,
// e.g. pipeline stages of unequal blocks), and a measured model whose fp32
// weights alone would take half of the machine's free memory in the
// launcher that measures it.
//
//   check_predicted_memory(cfg, /*workers=*/4, memory_per_worker(job));   // throws Error when it does not fit
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "artel/plan/layout.h"
#include "artel/plan/model_description.h"
#include "artel/plan/transformer_shape.h"
#include "artel/train/train_config.h"

namespace artel::cli {

// The classes of the run's data (c.data, or the bundled data of its model
// when empty), opened as the run opens it: characters, words or token ids.
int64_t data_vocabulary(const train::TrainConfig& c);

// The GPT of a run's config over data of `data_vocabulary` classes.
plan::TransformerShape gpt_shape(const train::TrainConfig& c, int64_t data_vocabulary);

// The run's model, of any kind make_model builds (the MLP, the CNN, the
// word LM), with its per-layer costs measured on a few samples of the run's
// data (plan/measured_costs.h): how `artel plan --model mlp` plans it.
plan::ModelDescription measured_model(const train::TrainConfig& c);

// The bytes a parameter takes in the run: fp32 weights and gradients, and
// its optimizer's state (AdamW's m and v, SGD's momentum if it has one).
plan::StateBytes artel_state(const train::TrainConfig& c);

// The memory one worker has, and where that figure comes from.
struct WorkerMemory {
  double bytes = 0;
  std::string source;  // "--memory-per-worker", "MemAvailable / 4 processes"
};

// --memory-per-worker when given (every process the launcher starts, a
// parameter server too, runs under it), else the machine's MemAvailable
// (/proc/meminfo) shared by the `processes`; nothing when neither is known.
std::optional<WorkerMemory> worker_memory(const std::string& memory_per_worker, int processes);

// Throws Error — one line with the planner's peak per process by kind
// against what a process has — when the run's layout over `workers`
// processes (dp = workers / (tp·pp); under --ps-servers, that many workers
// beside the servers) is predicted not to fit.
void check_predicted_memory(const train::TrainConfig& cfg, int workers, const WorkerMemory& memory);

}  // namespace artel::cli
