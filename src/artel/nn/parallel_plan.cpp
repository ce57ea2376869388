#include "artel/nn/parallel_plan.h"

namespace artel::nn {

const char* style_name(TensorParallelStyle style) {
  switch (style) {
    case TensorParallelStyle::column: return "column";
    case TensorParallelStyle::row: return "row";
    case TensorParallelStyle::vocab: return "vocab";
  }
  return "?";
}

bool path_matches(const std::string& pattern, const std::string& path) {
  size_t p = 0, q = 0;
  while (p <= pattern.size() && q <= path.size()) {
    const size_t pe = std::min(pattern.find('.', p), pattern.size());
    const size_t qe = std::min(path.find('.', q), path.size());
    const std::string_view a(pattern.data() + p, pe - p), b(path.data() + q, qe - q);
    if (a != "*" && a != b) return false;
    const bool pattern_done = pe == pattern.size(), path_done = qe == path.size();
    if (pattern_done || path_done) return pattern_done && path_done;
    p = pe + 1, q = qe + 1;
  }
  return false;
}

bool path_within(const std::string& path, const std::string& module) {
  if (module.empty()) return true;
  return path.compare(0, module.size(), module) == 0 && (path.size() == module.size() || path[module.size()] == '.');
}

}  // namespace artel::nn
