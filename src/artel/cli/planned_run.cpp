#include "artel/cli/planned_run.h"

#include <algorithm>
#include <fstream>
#include <functional>
#include <sstream>

#include "artel/cli/machine_calibration.h"
#include "artel/core/error.h"
#include "artel/core/memory_limit.h"
#include "artel/data/dataset.h"
#include "artel/launch/memory_size.h"
#include "artel/models/model.h"
#include "artel/parallel/ps_protocol.h"
#include "artel/plan/measured_costs.h"
#include "artel/plan/memory_model.h"
#include "artel/plan/parameter_server_memory.h"
#include "artel/train/parameter_server.h"
#include "artel/train/recipe.h"

namespace artel::cli {

int64_t data_vocabulary(const train::TrainConfig& c) { return train::open_run_data(c)->num_classes(); }

plan::TransformerShape gpt_shape(const train::TrainConfig& c, int64_t data_vocabulary) {
  return {c.n_layer, c.n_head, c.n_embd, c.block_size, train::model_vocab(c, data_vocabulary)};
}

plan::StateBytes artel_state(const train::TrainConfig& c) {
  return c.optimizer == "sgd" ? plan::StateBytes::artel_sgd(c.momentum != 0) : plan::StateBytes::artel_adamw();
}

namespace {

// The run's model, declared over its opened data, measured as
// measured_model says: all its parts, timed, or (`timed` false) only the
// parts c's own layout needs, for its memory.
plan::ModelDescription measure_run_model(const train::TrainConfig& c, const data::Dataset& data,
                                         const models::ModelConfig& config, bool timed) {
  constexpr int64_t kSamples = 4;  // the costs are per sample; a batch of several runs the ops as training does
  // Timed: its work outside the products on a batch of the run's size, at
  // the rate `artel plan calibrate` gives this machine's streaming kernels.
  const plan::MeasuredParts parts =
      timed ? plan::MeasuredParts{.timing = plan::StreamTiming{.batch = data.val_batch(c.batch_size, 0).x,
                                                               .bytes_per_second = measure_kernel_stream_rate()}}
            : plan::MeasuredParts{.timing = std::nullopt,
                                  .selective = c.recompute == "selective",
                                  .tensor_parallel = c.tp > 1};
  return plan::measure_model_costs(
      c.model, [&config] { return std::unique_ptr<nn::Model>(models::declare_model(config)); },
      data.val_batch(kSamples, 0).x, config.seed, parts);
}

// MemAvailable of /proc/meminfo in bytes; nothing when it cannot be read.
std::optional<double> mem_available() {
  std::ifstream in("/proc/meminfo");
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string key;
    double kib = 0;
    if (fields >> key >> kib && key == "MemAvailable:") return kib * 1024;
  }
  return std::nullopt;
}

// The machine as predict_memory needs it: `workers` on one host, each with
// `bytes`. The rates only time a step, which the check does not look at.
plan::Cluster this_machine(int workers, double bytes) {
  const nlohmann::json rate = {{"value", 1.0}, {"source", "not used: the memory check times nothing"}};
  const nlohmann::json link = {{"alpha", rate}, {"beta", rate}};
  return plan::parse_cluster({{"name", "this machine"},
                              {"hosts", 1},
                              {"workers_per_host", workers},
                              {"device",
                               {{"name", "cpu"},
                                {"peak_flops", {{"fp32", rate}, {"bf16", rate}}},
                                {"gemm_efficiency", rate},
                                {"memory_bytes", bytes},
                                {"memory_bandwidth", rate},
                                {"memory_efficiency", rate}}},
                              {"links", {{"intra_host", link}, {"inter_host", link}}}},
                             "this machine");
}

// Byte counts in one unit for a whole message, so that its parts compare
// at a glance: GiB, or MiB when `largest` is under one (a small model's
// parts would read 0.00 GiB).
std::function<std::string(double)> bytes_in_unit_of(double largest) {
  const bool in_gib = largest >= 1024.0 * 1024 * 1024;
  return [in_gib](double bytes) {
    std::ostringstream os;
    os.precision(2);
    os << std::fixed << bytes / (in_gib ? 1024.0 * 1024 * 1024 : 1024.0 * 1024) << (in_gib ? " GiB" : " MiB");
    return os.str();
  };
}

// The model the check predicts: the GPT from its shape, any other model
// from its measurement, untimed. Measuring holds the whole model's fp32
// weights in this process once; a model whose weights alone would take
// more than half of what the machine has free is not measured (nothing,
// and the run starts unchecked) rather than risk this process's memory.
std::optional<plan::ModelDescription> model_to_check(const train::TrainConfig& cfg, const data::Dataset& data) {
  if (cfg.model == "gpt") return plan::transformer_model("gpt", gpt_shape(cfg, data.num_classes()));
  const models::ModelConfig config = train::make_model_config(cfg, data.num_classes());
  const std::optional<double> available = mem_available();
  const double weights = 4.0 * models::declare_model(config)->num_parameters();
  if (!available || weights > *available / 2) return std::nullopt;
  return measure_run_model(cfg, data, config, /*timed=*/false);
}

// The server of a parameter-server job that keeps the most elements, and
// how many: the shard plan the job itself makes (train::ps_table), over the
// declared model's shapes.
struct LargestShard {
  int server = 0;
  int64_t elements = 0;
};
LargestShard largest_ps_shard(const train::TrainConfig& cfg, int64_t data_classes) {
  const std::unique_ptr<nn::Model> model = models::declare_model(train::make_model_config(cfg, data_classes));
  const parallel::PsLayout layout(train::ps_table(*model, cfg.ps_sparse), static_cast<int>(cfg.ps_servers));
  const auto largest = std::max_element(layout.elements.begin(), layout.elements.end());
  return {static_cast<int>(largest - layout.elements.begin()), *largest};
}

// The refusal: one line, every part in one unit.
[[noreturn]] void refuse(const plan::MemoryPrediction& m, const std::string& process, const WorkerMemory& memory,
                         const std::string& communication, const std::string& hint = out_of_memory_hint()) {
  const auto size = bytes_in_unit_of(std::max(m.total(), memory.bytes));
  throw Error("the planner predicts " + size(m.total()) + " " + process + ": parameters " + size(m.parameters) +
                  ", gradients " + size(m.gradients) + ", optimizer state " + size(m.optimizer_state) +
                  ", activations " + size(m.activations) + ", " + communication + " " + size(m.communication) +
                  ") but a worker has " + size(memory.bytes) + " (" + memory.source + ")",
              hint + "; --no-memory-check starts it anyway");
}

}  // namespace

plan::ModelDescription measured_model(const train::TrainConfig& c) {
  const std::unique_ptr<data::Dataset> data = train::open_run_data(c);
  return measure_run_model(c, *data, train::make_model_config(c, data->num_classes()), /*timed=*/true);
}

std::optional<WorkerMemory> worker_memory(const std::string& memory_per_worker, int processes) {
  if (!memory_per_worker.empty()) {
    return WorkerMemory{static_cast<double>(launch::parse_memory_size(memory_per_worker)), "--memory-per-worker"};
  }
  const std::optional<double> available = mem_available();
  if (!available) return std::nullopt;
  return WorkerMemory{*available / processes, "MemAvailable" + (processes > 1 ? " / " + std::to_string(processes) +
                                                                                    " processes"
                                                                              : std::string())};
}

void check_predicted_memory(const train::TrainConfig& cfg, int workers, const WorkerMemory& memory) {
  plan::Layout l;
  l.tp = cfg.tp;
  l.pp = cfg.pp;
  l.dp = workers / (cfg.tp * cfg.pp);
  l.micro_batches = cfg.micro_batches;
  l.schedule = plan::parse_schedule(cfg.schedule);
  l.chunks = cfg.chunks;
  l.zero = static_cast<int>(cfg.zero);
  l.recompute = plan::parse_recompute(cfg.recompute);
  plan::Workload w;
  w.global_batch = cfg.batch_size * l.dp;  // per micro-step: --accum repeats it, holding no more
  w.precision = plan::parse_precision(cfg.precision);
  w.activations = plan::Activations::artel;  // fp32 under bf16 too, with the products' bf16 copies
  w.cross_host = plan::CrossHost::hierarchical;
  w.tables_apart = true;
  w.state = artel_state(cfg);
  w.dropout = cfg.model == "gpt" && cfg.dropout > 0;  // a measured model's masks are in its activations
  const std::unique_ptr<data::Dataset> data = train::open_run_data(cfg);
  const std::optional<plan::ModelDescription> checked = model_to_check(cfg, *data);
  if (!checked) return;
  const plan::ModelDescription& model = *checked;
  // The planner splits a GPT's activations by tokens; another model's are
  // predicted whole, which overstates what sequence parallelism keeps.
  l.sequence_parallel = cfg.sequence_parallel && model.transformer.has_value();
  const plan::Cluster machine = this_machine(workers, memory.bytes);

  if (cfg.ps_servers > 0) {  // Note [A parameter server's memory] (plan/parameter_server_memory.h)
    w.global_batch = cfg.batch_size;
    const LargestShard largest = largest_ps_shard(cfg, data->num_classes());
    plan::ParameterServerMemory m;
    try {
      m = plan::predict_ps_memory(model, machine, w, l.recompute, workers, largest.elements);
    } catch (const Error&) {
      return;  // a replica the planner does not model: not checked
    }
    if (!m.server.fits())
      refuse(m.server,
             "a parameter server (server " + std::to_string(largest.server) + " of " + std::to_string(cfg.ps_servers) +
                 ", the largest shard",
             memory, "pushes and pulls of " + std::to_string(workers) + " workers",
             "more --ps-servers split the parameters further, or raise --memory-per-worker");
    if (!m.worker.fits())
      refuse(m.worker, "a parameter-server worker (a whole replica, its optimizer state on the servers", memory,
             "the servers' copy");
    return;
  }
  try {
    plan::validate_layout(model, l, w, machine.workers());
  } catch (const Error&) {
    return;  // a layout the planner does not model: not checked
  }
  const plan::MemoryPrediction m = plan::predict_memory(model, machine, l, w);
  if (!m.fits())
    refuse(m, "a worker (stage " + std::to_string(m.stage) + " of " + plan::describe(l), memory, "communication");
}

}  // namespace artel::cli
