// Fixed chunking for reductions that keep one partial result per chunk.
//
// parallel_for decides its own chunks; a kernel that sums rows into per-thread
// partials (a bias gradient, LayerNorm's dγ) needs the chunk count up front to
// size the partial buffers. for_chunks gives each chunk its index.
//
//   int64_t k = num_chunks(rows, 64);
//   std::vector<float> part(k * C);
//   for_chunks(rows, k, [&](int64_t c, int64_t r0, int64_t r1) { ... part[c * C + j] ... });
#pragma once

#include <algorithm>
#include <cstdint>

#include "artel/core/threads.h"

namespace artel::kernels {

// Chunks of at least `grain` items, at most one per thread, at least one.
inline int64_t num_chunks(int64_t n, int64_t grain) {
  int64_t by_work = grain > 0 ? (n + grain - 1) / grain : n;
  return std::max<int64_t>(1, std::min<int64_t>(num_threads(), by_work));
}

// fn(chunk, begin, end) for `chunks` near-equal pieces of [0, n).
template <class Fn>
void for_chunks(int64_t n, int64_t chunks, const Fn& fn) {
  if (chunks <= 1) {
    fn(int64_t{0}, int64_t{0}, n);
    return;
  }
  parallel_for(chunks, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) fn(c, n * c / chunks, n * (c + 1) / chunks);
  });
}

}  // namespace artel::kernels
