// dst[i] += src[i]: gradient accumulation, the autograd engine's one kernel.
#pragma once

#include <cstdint>

namespace artel::kernels {

void add_into(float* dst, const float* src, int64_t n);

}  // namespace artel::kernels
