#include "artel/train/mesh_worker.h"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>

#include "artel/comm/gather_named.h"
#include "artel/core/memory_stats.h"
#include "artel/core/trace.h"
#include "artel/kernels/gemm.h"
#include "artel/models/model.h"
#include "artel/parallel/mesh_groups.h"
#include "artel/train/trace_export.h"
#include "artel/train/train_bench.h"  // median_after_warmup
#include "artel/train/trace_gather.h"

namespace artel::train {

namespace {

std::string mib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

// "trace.json" -> "trace.svg"; other names get ".svg" appended.
std::string svg_path(const std::string& trace) {
  const std::string json = ".json";
  if (trace.size() > json.size() && trace.compare(trace.size() - json.size(), json.size(), json) == 0)
    return trace.substr(0, trace.size() - json.size()) + ".svg";
  return trace + ".svg";
}

// Room on each pipeline link for every hand-over (or its gradient) of a
// step (parallel::pipeline_link_bytes). A GPT's hand-over is (rows, T, C);
// other models' are taken to be at most 1024 floats a row (the MNIST models
// hand over at most 6·28·28 = 4704: those stream, which their sizes make
// cheap).
size_t link_message_bytes(const TrainConfig& cfg) {
  const int64_t rows = cfg.batch_size / cfg.micro_batches;
  const int64_t row = models::trains_on_text(cfg.model) ? cfg.block_size * cfg.n_embd : 1024;
  return parallel::pipeline_link_bytes(static_cast<double>(rows * row) * sizeof(float), cfg.micro_batches * cfg.chunks);
}

}  // namespace

MeshWorker::MeshWorker(TrainConfig cfg, RunOptions run, std::shared_ptr<comm::ProcessGroup> world,
                       parallel::DdpOptions ddp)
    : cfg_(std::move(cfg)), run_(run), world_(std::move(world)) {
  cfg_.validate();
  // Before the mesh times its pieces (--stage-layers cost) with the library the run will use.
  kernels::set_gemm_library(kernels::parse_gemm_library(cfg_.gemm));
  kernels::set_gemm_precision(kernels::parse_gemm_precision(cfg_.precision));
  mesh_ = std::make_unique<ModelMesh>(cfg_,
                                      parallel::make_mesh_groups(world_, static_cast<int>(cfg_.pp),
                                                                 static_cast<int>(cfg_.tp), link_message_bytes(cfg_),
                                                                 /*ring=*/cfg_.chunks > 1),
                                      std::move(ddp));
  trainer_ = std::make_unique<Trainer>(cfg_, run_, mesh_.get());
}

MeshWorker::~MeshWorker() = default;

std::ostream& MeshWorker::out() const { return run_.out ? *run_.out : std::cout; }

RunSummary MeshWorker::run() {
  const bool tracing = !cfg_.trace.empty();
  if (tracing) {
    trace::take();  // start clean
    trace::enable(true);
  }
  RunSummary summary = trainer_->run();
  if (tracing) trace::enable(false);
  report_stages();
  if (tracing) write_trace();
  return summary;
}

// Rank 0 prints what each stage (of replica 0, tensor-parallel rank 0) held at most.
void MeshWorker::report_stages() {
  const parallel::MeshGroups& g = mesh_->groups();
  Tensor mine = Tensor::empty({3}, DType::i64);
  mine.data<int64_t>()[0] = g.coord.dp == 0 && g.coord.tp == 0 ? g.coord.pp : -1;
  mine.data<int64_t>()[1] = mesh_->stats().peak_live_micro_batches;
  mine.data<int64_t>()[2] = mesh_->stats().peak_activation_bytes;
  std::vector<comm::NamedTensors> all = comm::gather_named(*world_, {{"stage", mine}});
  if (world_->rank() != 0) return;
  const char* holds = cfg_.schedule == "gpipe" ? "M micro-batches'"
                      : cfg_.schedule == "1f1b" ? "min(M, P - stage) micro-batches'"
                                                : "min(M·V, 2(P - stage - 1) + (V - 1)·P + 1) chunks' (V chunks a stage)";
  out() << "pipeline: " << cfg_.pp << " stage(s), " << cfg_.micro_batches << " micro-batch(es), " << cfg_.schedule
        << " (a stage holds at most " << holds
        << " activations)\n  stage  layers   live micro-batches  peak activation memory\n";
  for (const auto& list : all) {
    const int64_t* d = list[0].second.data<int64_t>();
    if (d[0] < 0) continue;
    char line[200];
    std::snprintf(line, sizeof line, "  %5lld  %s  %18lld  %s\n", static_cast<long long>(d[0]),
                  mesh_->layers_of_stage(static_cast<int>(d[0])).c_str(), static_cast<long long>(d[1]),
                  mib(d[2]).c_str());
    out() << line;
  }
  out() << std::flush;
}

void MeshWorker::write_trace() {
  const parallel::MeshGroups& g = mesh_->groups();
  const std::string label = detail::concat("rank ", world_->rank(), " (dp ", g.coord.dp, ", pp ", g.coord.pp, ", tp ",
                                           g.coord.tp, ")");
  std::vector<RankTrace> all = write_run_trace(cfg_.trace, world_.get(), label, out());
  if (world_->rank() != 0) return;

  // Stage rows: replica 0, tensor-parallel rank 0, compute events by step.
  const int P = static_cast<int>(cfg_.pp), M = static_cast<int>(cfg_.micro_batches);
  std::vector<std::map<int64_t, std::vector<trace::Event>>> by_step(static_cast<size_t>(P));
  for (const RankTrace& rt : all) {
    parallel::Coord c = g.topology.coord_of(rt.rank);
    if (c.dp != 0 || c.tp != 0) continue;
    for (const trace::Event& e : rt.events)
      if (e.category == "compute" && e.step >= 1) by_step[static_cast<size_t>(c.pp)][e.step].push_back(e);
  }
  const int64_t last = by_step[0].empty() ? 0 : by_step[0].rbegin()->first;
  if (P < 2 || last < 1) return;
  // Per stage and step after the first (warm-up): the idle share, what the
  // stages' unequal busy times alone imply, and the busy time. Medians over
  // steps, as a noisy machine's stalls land in single steps.
  std::vector<std::vector<double>> idle(static_cast<size_t>(P)), unequal(idle), busy(idle);
  std::vector<SvgRow> rows;
  for (int64_t k = last > 1 ? 2 : 1; k <= last; ++k) {
    rows.clear();
    for (int s = 0; s < P; ++s) rows.push_back({detail::concat("stage ", s), by_step[static_cast<size_t>(s)][k]});
    Utilisation u = utilisation(rows);
    std::vector<double> implied =
        idle_of_unequal_stages(u.busy_ms, M, parallel::parse_schedule_kind(cfg_.schedule), static_cast<int>(cfg_.chunks));
    for (size_t s = 0; s < static_cast<size_t>(P); ++s) {
      idle[s].push_back(u.idle_share[s]);
      unequal[s].push_back(implied[s]);
      busy[s].push_back(u.busy_ms[s]);
    }
  }
  const size_t steps = idle[0].size();
  // Equal stages through the same simulator: (P - 1)/(M + P - 1) for GPipe
  // and 1F1B, (P - 1)/(V·M + P - 1) interleaved.
  const double ideal = idle_of_unequal_stages(std::vector<double>(static_cast<size_t>(P), 1.0), M,
                                              parallel::parse_schedule_kind(cfg_.schedule), static_cast<int>(cfg_.chunks))[0];
  const std::string svg = svg_path(cfg_.trace);
  write_text_file(svg, pipeline_svg(rows, detail::concat(cfg_.schedule, ", P = ", P, cfg_.chunks > 1 ? detail::concat(", V = ", cfg_.chunks) : "",
                                                   ", M = ", M, ": step ", last)));
  out() << "wrote " << svg << "\nbubble (idle share of a step, median over " << steps
        << " step(s)); ideal " << (cfg_.chunks > 1 ? "(P - 1)/(V·M + P - 1)" : "(P - 1)/(M + P - 1)") << " = " << ideal
        << "\n";
  for (size_t s = 0; s < static_cast<size_t>(P); ++s) {
    const double measured = median_after_warmup(idle[s], 0);
    char line[160];
    std::snprintf(line, sizeof line, "  stage %zu: %.3f (%.2fx ideal), busy %.1f ms a step; unequal stages alone: %.3f\n",
                  s, measured, measured / ideal, median_after_warmup(busy[s], 0),
                  median_after_warmup(unequal[s], 0));
    out() << line;
  }
  out() << "  (unequal stages alone: the idle these busy times imply with no hand-over time or jitter)\n";
  out() << std::flush;
}

}  // namespace artel::train
