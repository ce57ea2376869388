#include "artel/train/memory_report.h"

#include <algorithm>
#include <cstdio>

#include "artel/core/error.h"

namespace artel::train {

void MemoryReport::keep_max(const MemoryReport& o) {
  parameters = std::max(parameters, o.parameters);
  gradients = std::max(gradients, o.gradients);
  optimizer_state = std::max(optimizer_state, o.optimizer_state);
  activations = std::max(activations, o.activations);
  communication = std::max(communication, o.communication);
  peak_resident = std::max(peak_resident, o.peak_resident);
  gathered = std::max(gathered, o.gathered);
  shared = std::max(shared, o.shared);
}

std::vector<int64_t> MemoryReport::values() const {
  return {parameters, gradients, optimizer_state, activations, communication, peak_resident, gathered, shared};
}

MemoryReport MemoryReport::from_values(const std::vector<int64_t>& v) {
  ARTEL_CHECK(v.size() == 8, "memory report: ", v.size(), " values, expected 8");
  return {.parameters = v[0], .gradients = v[1], .optimizer_state = v[2], .activations = v[3],
          .communication = v[4], .peak_resident = v[5], .gathered = v[6], .shared = v[7]};
}

nlohmann::ordered_json MemoryReport::to_json() const {
  nlohmann::ordered_json j;
  if (!label.empty()) j["process"] = label;
  j.update(nlohmann::ordered_json{{"parameters", parameters},
                                  {"gradients", gradients},
                                  {"optimizer_state", optimizer_state},
                                  {"activations", activations},
                                  {"communication", communication},
                                  {"peak_resident", peak_resident},
                                  {"gathered", gathered},
                                  {"shared", shared}});
  return j;
}

std::string memory_table(const std::vector<MemoryReport>& workers) {
  bool gathering = false, labelled = false, shared = false;
  for (const MemoryReport& m : workers) {
    gathering = gathering || m.gathered > 0;
    shared = shared || m.shared > 0;
    labelled = labelled || !m.label.empty();
  }
  std::string s = std::string("memory: peak MiB per ") + (labelled ? "process\n  process " : "worker\n  rank") +
                  "  parameters  gradients  optimizer  activations  communication  resident (VmHWM)";
  if (shared) s += "  of it shared (held once)";
  s += gathering ? "  of the parameters gathered (ZeRO-3's units in use)\n" : "\n";
  auto mib = [](int64_t b) { return static_cast<double>(b) / (1 << 20); };
  for (size_t r = 0; r < workers.size(); ++r) {
    const MemoryReport& m = workers[r];
    const std::string who = m.label.empty() ? std::to_string(r) : m.label;
    char line[240];
    int n = std::snprintf(line, sizeof line, "  %*s  %10.2f  %9.2f  %9.2f  %11.2f  %13.2f  %16.2f", labelled ? 8 : 4,
                          who.c_str(), mib(m.parameters), mib(m.gradients), mib(m.optimizer_state),
                          mib(m.activations), mib(m.communication), mib(m.peak_resident));
    if (shared) n += std::snprintf(line + n, sizeof line - static_cast<size_t>(n), "  %24.2f", mib(m.shared));
    if (gathering) std::snprintf(line + n, sizeof line - static_cast<size_t>(n), "  %34.2f", mib(m.gathered));
    s += line;
    s += "\n";
  }
  return s;
}

}  // namespace artel::train
