#include "artel/parallel/wrapped_parameters.h"

#include <set>
#include <sstream>

#include "artel/comm/gather_strings.h"
#include "artel/core/error.h"

namespace artel::parallel {
namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

}  // namespace

void check_wrapped_parameters(const std::string& who, const std::vector<WrappedParameter>& params,
                              comm::ProcessGroup& group) {
  std::set<const autograd::VariableImpl*> seen;
  std::string mine;  // a line a parameter: "name [shape]"
  for (const WrappedParameter& p : params) {
    const std::string where = who + ": parameter '" + p.name + "'";
    ARTEL_CHECK(p.variable.requires_grad(), where, " is frozen (requires no gradient), so there is nothing to average",
                " (hint: wrap only the parameters that train)");
    ARTEL_CHECK(seen.insert(p.variable.impl()).second, where, " is a parameter listed earlier under another name (a "
                "module registered twice?), and would be averaged and stepped twice (hint: list each once)");
    mine += p.name + " " + shape_str(p.shape) + "\n";
  }
  if (group.size() == 1) return;
  const std::vector<std::string> all = comm::all_gather_strings(
      group, mine, {.max_bytes = 64 << 20, .what = "list of parameters", .hint = "wrap the same model on every rank"});
  const std::vector<std::string> first = lines_of(all[0]);
  for (size_t r = 1; r < all.size(); ++r) {
    if (all[r] == all[0]) continue;
    const std::vector<std::string> other = lines_of(all[r]);
    size_t k = 0;
    while (k < first.size() && k < other.size() && first[k] == other[k]) ++k;
    auto said = [](const std::vector<std::string>& list, size_t i) {
      return i < list.size() ? "'" + list[i] + "'" : std::string("none (its list has ") + std::to_string(list.size()) + ")";
    };
    throw Error(who + ": ranks wrap different models: parameter " + std::to_string(k) + " is " + said(other, k) +
                    " on rank " + std::to_string(r) + " and " + said(first, k) + " on rank 0",
                "every rank must build the same model and list its parameters in the same order");
  }
}

}  // namespace artel::parallel
