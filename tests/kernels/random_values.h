// Normal(0, 1) inputs for kernel tests: n draws of stream `stream` of `seed`
// (core/rng.h). Each test file names its own stream, so its data do not
// change when another file's do.
#pragma once

#include <cstdint>
#include <vector>

#include "artel/core/rng.h"

namespace artel_test {

inline std::vector<float> random_values(int64_t n, uint64_t seed, uint64_t stream) {
  artel::Rng rng(seed, stream);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = rng.normal();
  return v;
}

}  // namespace artel_test
