#include "artel/launch/core_binding.h"

#include <cstddef>

namespace artel::launch {

std::vector<std::vector<int>> core_binding(int nproc, int threads, const std::vector<int>& allowed) {
  std::vector<std::vector<int>> cores(static_cast<size_t>(nproc));
  if (static_cast<size_t>(nproc) * static_cast<size_t>(threads) > allowed.size()) return cores;
  for (size_t r = 0; r < cores.size(); ++r)
    cores[r].assign(allowed.begin() + static_cast<std::ptrdiff_t>(r * static_cast<size_t>(threads)),
                    allowed.begin() + static_cast<std::ptrdiff_t>((r + 1) * static_cast<size_t>(threads)));
  return cores;
}

}  // namespace artel::launch
