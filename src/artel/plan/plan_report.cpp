#include "artel/plan/plan_report.h"

#include <cstdio>
#include <sstream>

#include "artel/plan/stage_work.h"

namespace artel::plan {

namespace {

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string gib(double bytes) { return fixed(bytes / (1024.0 * 1024 * 1024), 2) + " GiB"; }

std::string share(double part, double whole) { return whole > 0 ? fixed(100 * part / whole, 1) + "%" : "-"; }

std::string pad(const std::string& s, size_t width) {
  return s.size() >= width ? s : std::string(width - s.size(), ' ') + s;
}

}  // namespace

std::string prediction_text(const Prediction& p, const ModelDescription& model, const Cluster& cluster,
                            const Workload& workload) {
  const StepTime& t = p.time;
  const MemoryPrediction& m = p.memory;
  std::ostringstream os;
  os << "model " << model.name << ": " << fixed(model.parameters() / 1e6, 2) << "M parameters; cluster " << cluster.name
     << ": " << cluster.workers() << " workers (" << cluster.host_count() << " hosts x " << cluster.per_host() << ")\n";
  os << "layout " << describe(p.layout) << ", micro-batch " << micro_batch_size(p.layout, workload) << ", global batch "
     << workload.global_batch << ", " << precision_name(workload.precision) << "\n";
  if (!model.transformer && p.layout.pp > 1) {
    os << "layers per stage";  // where its layers were cut, as `artel train` cuts them
    const std::vector<parallel::PieceRange> cut = listed_stage_layers(model, p.layout);
    for (int s = 0; s < p.layout.pp; ++s) os << " " << parallel::stage_runs(cut, static_cast<int>(p.layout.pp), s);
    os << " (balanced by parameters, as artel train cuts)\n";
  }
  os << "\n";
  os << "step time " << fixed(t.step * 1e3, 2) << " ms\n";
  const std::pair<const char*, double> rows[] = {
      {"compute", t.compute},
      {"  of which recomputation", t.recompute},
      {"tensor-parallel comm", t.tensor_parallel},
      {"pipeline sends (exposed)", t.pipeline_sends},
      {"pipeline bubble", t.bubble},
      {"data-parallel comm (exposed)", t.data_parallel},
      {"ZeRO-3 gathers (exposed)", t.zero_gathers},
      {"optimizer step", t.optimizer},
  };
  for (const auto& [name, v] : rows) {
    os << "  " << name << std::string(30 - std::string(name).size(), ' ') << pad(fixed(v * 1e3, 2), 12) << " ms  "
       << pad(share(v, t.step), 6) << "\n";
  }
  os << "  critical stage " << t.critical_stage << ": " << fixed(t.flops_per_worker / t.step / 1e12, 2)
     << " TFLOP/s per worker of matrix products\n\n";
  os << "memory per worker (stage " << m.stage << ") " << gib(m.total()) << " of " << gib(m.capacity)
     << (m.fits() ? " (fits)" : " (DOES NOT FIT)") << "\n";
  const std::pair<const char*, double> mem[] = {
      {"parameters", m.parameters},   {"  of which ZeRO-3 gathered", m.gathered},
      {"gradients", m.gradients},     {"optimizer state", m.optimizer_state},
      {"activations", m.activations}, {"communication buffers", m.communication},
      {"runtime (program, data)", m.runtime}};
  for (const auto& [name, v] : mem) {
    os << "  " << name << std::string(30 - std::string(name).size(), ' ') << pad(gib(v), 14) << "\n";
  }
  return os.str();
}

std::string ranking_text(const std::vector<Prediction>& ranked, size_t top) {
  std::ostringstream os;
  os << "rank    dp    tp    pp  micro  schedule       zero  recompute  sp  grad          step_ms  compute  tp_comm  "
        "dp_comm  pp_send  zero3   bubble  mem_GiB  fits\n";
  for (size_t i = 0; i < ranked.size() && i < top; ++i) {
    const Prediction& p = ranked[i];
    const Layout& l = p.layout;
    std::string schedule = schedule_name(l.schedule);
    if (l.schedule == Schedule::interleaved) schedule.append("x").append(std::to_string(l.chunks));
    char line[512];
    std::snprintf(line, sizeof line,
                  "%4zu %5lld %5lld %5lld %6lld  %-13s %5d  %-9s  %-2s  %-12s %8.2f %8.2f %8.2f %8.2f %8.2f %6.2f "
                  "%8.2f %8.2f  %s\n",
                  i + 1, static_cast<long long>(l.dp), static_cast<long long>(l.tp), static_cast<long long>(l.pp),
                  static_cast<long long>(l.micro_batches), schedule.c_str(), l.zero, recompute_name(l.recompute),
                  l.sequence_parallel ? "y" : "n", compression_name(l.compression).c_str(), p.time.step * 1e3,
                  p.time.compute * 1e3, p.time.tensor_parallel * 1e3, p.time.data_parallel * 1e3,
                  p.time.pipeline_sends * 1e3, p.time.zero_gathers * 1e3, p.time.bubble * 1e3,
                  p.memory.total() / (1024.0 * 1024 * 1024), p.memory.fits() ? "yes" : "NO");
    os << line;
  }
  if (ranked.size() > top) os << "(" << ranked.size() - top << " more; --top N shows more)\n";
  return os.str();
}

nlohmann::ordered_json layout_json(const Layout& l, const ModelDescription& model, const Workload& w) {
  nlohmann::ordered_json j;
  j["dp"] = l.dp;
  j["tp"] = l.tp;
  j["pp"] = l.pp;
  j["micro_batches"] = l.micro_batches;
  j["micro_batch_size"] = micro_batch_size(l, w);
  j["schedule"] = schedule_name(l.schedule);
  j["chunks"] = l.chunks;
  j["zero"] = l.zero;
  j["recompute"] = recompute_name(l.recompute);
  j["sequence_parallel"] = l.sequence_parallel;
  j["grad_compression"] = compression_name(l.compression);
  if (l.schedule == Schedule::interleaved) return j;  // a stage holds several runs of layers: not one range
  nlohmann::ordered_json stages = nlohmann::ordered_json::array();
  const int64_t blocks = model.transformer ? model.transformer->n_layer : 0;
  if (model.transformer)
    for (int64_t s = 0; s < l.pp; ++s) stages.push_back({s * blocks / l.pp, (s + 1) * blocks / l.pp});
  else
    for (const parallel::PieceRange& r : listed_stage_layers(model, l)) stages.push_back({r.first, r.last});
  j["layers_per_stage"] = stages;
  return j;
}

nlohmann::ordered_json prediction_json(const Prediction& p, const ModelDescription& model, const Workload& w) {
  nlohmann::ordered_json j;
  j["layout"] = layout_json(p.layout, model, w);
  j["time"] = p.time.to_json();
  j["memory"] = p.memory.to_json();
  return j;
}

nlohmann::ordered_json ranking_json(const std::vector<Prediction>& ranked, const ModelDescription& model,
                                    const Workload& w, size_t top) {
  nlohmann::ordered_json j = nlohmann::ordered_json::array();
  for (size_t i = 0; i < ranked.size() && i < top; ++i) {
    nlohmann::ordered_json row = prediction_json(ranked[i], model, w);
    row["rank"] = i + 1;
    j.push_back(row);
  }
  return j;
}

}  // namespace artel::plan
