// Element-wise reductions for collectives: every dtype × every ReduceOp, as
// plain loops the compiler vectorises (-O3 -march=native gives AVX-512).
//
// reduce_sources combines k buffers in rank order (so every rank computes the
// same bits) and writes once; bf16 accumulates in f32 and rounds once.
//
//   const void* srcs[] = {a, b, c};
//   reduce_sources(out, srcs, 3, n, DType::f32, ReduceOp::sum);
#pragma once

#include <cstddef>

#include "artel/comm/process_group.h"

namespace artel::comm {

// dst[i] = op(srcs[0][i], ..., srcs[k-1][i]); k >= 1; dst may alias srcs[j].
void reduce_sources(void* dst, const void* const* srcs, int k, size_t n, DType dtype, ReduceOp op);
// Reduces like reduce_sources and writes the result (after finish_reduce's
// averaging) to every one of `dsts` — a rank's share straight into all ranks'
// outputs. A destination may be one of the sources (in place); no other
// overlap. With `streaming`,
// stores bypass the cache (for buffers far larger than the cache); the caller
// publishes them with a release store, which follows a store fence here.
void reduce_to_many(std::byte* const* dsts, int ndst, const std::byte* const* srcs, int k, size_t n, DType dtype,
                    ReduceOp op, int world, bool streaming);
// memcpy with non-temporal stores (for large copies that will not be read soon).
void stream_copy(void* dst, const void* src, size_t nbytes);
// dst[i] = op(dst[i], src[i]).
void reduce_into(void* dst, const void* src, size_t n, DType dtype, ReduceOp op);
// For ReduceOp::avg: divides the sums by `world` (integers: truncating). A
// no-op for the other ops.
void finish_reduce(void* dst, size_t n, DType dtype, ReduceOp op, int world);

}  // namespace artel::comm
