#include "artel/comm/reduce.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include <immintrin.h>

#include <type_traits>

namespace artel::comm {
namespace {

// avg sums like sum; finish_reduce divides afterwards.
struct Sum { template <class T> static T apply(T a, T b) { return a + b; } };
struct Prod { template <class T> static T apply(T a, T b) { return a * b; } };
struct Max { template <class T> static T apply(T a, T b) { return a > b ? a : b; } };
struct Min { template <class T> static T apply(T a, T b) { return a < b ? a : b; } };

// One pass for up to three sources (element-wise, so dst may alias any of
// them); more sources go block by block through an L1-sized accumulator, so
// a dst that aliases a later source is still read before it is written.
template <class Op, class T>
void combine(T* dst, const void* const* srcs, int k, size_t n) {
  auto src = [&](int j) { return static_cast<const T*>(srcs[j]); };
  if (k == 1) {
    if (dst != src(0)) std::copy(src(0), src(0) + n, dst);
  } else if (k == 2) {
    const T *a = src(0), *b = src(1);
    for (size_t i = 0; i < n; ++i) dst[i] = Op::apply(a[i], b[i]);
  } else if (k == 3) {
    const T *a = src(0), *b = src(1), *c = src(2);
    for (size_t i = 0; i < n; ++i) dst[i] = Op::apply(Op::apply(a[i], b[i]), c[i]);
  } else {
    constexpr size_t kBlock = 2048 / sizeof(T) * 4;
    alignas(64) T acc[kBlock];
    for (size_t base = 0; base < n; base += kBlock) {
      const size_t m = std::min(kBlock, n - base);
      const T *a = src(0) + base, *b = src(1) + base;
      for (size_t i = 0; i < m; ++i) acc[i] = Op::apply(a[i], b[i]);
      int j = 2;
      for (; j + 1 < k; j += 2) {
        const T *c = src(j) + base, *d = src(j + 1) + base;
        for (size_t i = 0; i < m; ++i) acc[i] = Op::apply(Op::apply(acc[i], c[i]), d[i]);
      }
      if (j < k) {
        const T* c = src(j) + base;
        for (size_t i = 0; i < m; ++i) acc[i] = Op::apply(acc[i], c[i]);
      }
      std::copy(acc, acc + m, dst + base);
    }
  }
}

inline float bf_to_f(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// bf16: widen every source to f32 in blocks, combine in f32, round once.
template <class Op>
void combine_bf16(uint16_t* dst, const void* const* srcs, int k, size_t n) {
  constexpr size_t kBlock = 512;
  float acc[kBlock];
  for (size_t base = 0; base < n; base += kBlock) {
    size_t m = std::min(kBlock, n - base);
    const uint16_t* s0 = static_cast<const uint16_t*>(srcs[0]) + base;
    for (size_t i = 0; i < m; ++i) acc[i] = bf_to_f(s0[i]);
    for (int j = 1; j < k; ++j) {
      const uint16_t* s = static_cast<const uint16_t*>(srcs[j]) + base;
      for (size_t i = 0; i < m; ++i) acc[i] = Op::apply(acc[i], bf_to_f(s[i]));
    }
    for (size_t i = 0; i < m; ++i) dst[base + i] = bf16(acc[i]).bits;
  }
}

template <class Op>
void dispatch_dtype(void* dst, const void* const* srcs, int k, size_t n, DType dtype) {
  switch (dtype) {
    case DType::f32: return combine<Op>(static_cast<float*>(dst), srcs, k, n);
    case DType::f64: return combine<Op>(static_cast<double*>(dst), srcs, k, n);
    case DType::i32: return combine<Op>(static_cast<int32_t*>(dst), srcs, k, n);
    case DType::i64: return combine<Op>(static_cast<int64_t*>(dst), srcs, k, n);
    case DType::bf16: return combine_bf16<Op>(static_cast<uint16_t*>(dst), srcs, k, n);
  }
}

template <class T>
void divide(T* p, size_t n, int world) {
  if constexpr (std::is_floating_point_v<T>) {
    // A power of two has an exact reciprocal, and scaling by it rounds as the
    // division does: the same bits, without the division's long latency.
    if ((world & (world - 1)) == 0) {
      const T inverse = T(1) / static_cast<T>(world);
      for (size_t i = 0; i < n; ++i) p[i] *= inverse;
      return;
    }
  }
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<T>(p[i] / static_cast<T>(world));
}

}  // namespace

void reduce_sources(void* dst, const void* const* srcs, int k, size_t n, DType dtype, ReduceOp op) {
  if (n == 0) return;
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg: return dispatch_dtype<Sum>(dst, srcs, k, n, dtype);
    case ReduceOp::prod: return dispatch_dtype<Prod>(dst, srcs, k, n, dtype);
    case ReduceOp::max: return dispatch_dtype<Max>(dst, srcs, k, n, dtype);
    case ReduceOp::min: return dispatch_dtype<Min>(dst, srcs, k, n, dtype);
  }
}

void reduce_into(void* dst, const void* src, size_t n, DType dtype, ReduceOp op) {
  const void* srcs[2] = {dst, src};
  reduce_sources(dst, srcs, 2, n, dtype, op);
}

void finish_reduce(void* dst, size_t n, DType dtype, ReduceOp op, int world) {
  if (op != ReduceOp::avg || world == 1) return;
  switch (dtype) {
    case DType::f32: return divide(static_cast<float*>(dst), n, world);
    case DType::f64: return divide(static_cast<double*>(dst), n, world);
    case DType::i32: return divide(static_cast<int32_t*>(dst), n, world);
    case DType::i64: return divide(static_cast<int64_t*>(dst), n, world);
    case DType::bf16: {
      auto* p = static_cast<uint16_t*>(dst);
      for (size_t i = 0; i < n; ++i) p[i] = bf16(bf_to_f(p[i]) / static_cast<float>(world)).bits;
      return;
    }
  }
}

void stream_copy(void* dst, const void* src, size_t nbytes) {
  auto* d = static_cast<std::byte*>(dst);
  auto* s = static_cast<const std::byte*>(src);
  size_t head = std::min(nbytes, (64 - reinterpret_cast<uintptr_t>(d) % 64) % 64);
  std::memcpy(d, s, head);
  d += head, s += head, nbytes -= head;
  for (; nbytes >= 64; d += 64, s += 64, nbytes -= 64) {
#if defined(__AVX512F__)
    _mm512_stream_si512(reinterpret_cast<__m512i*>(d), _mm512_loadu_si512(s));
#else  // AVX2 machines (AMD Zen 3): two 32-byte non-temporal stores per line
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s)));
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + 32), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 32)));
#endif
  }
  std::memcpy(d, s, nbytes);
  _mm_sfence();
}

void reduce_to_many(std::byte* const* dsts, int ndst, const std::byte* const* srcs, int k, size_t n, DType dtype,
                    ReduceOp op, int world, bool streaming) {
  const size_t e = dtype_size(dtype);
  constexpr size_t kBlockBytes = 16 << 10;  // stays in L1 between the reduction and the copies
  alignas(64) std::byte block[kBlockBytes];
  const size_t per = kBlockBytes / e;
  std::vector<const void*> at(k);
  for (size_t base = 0; base < n; base += per) {
    size_t m = std::min(per, n - base);
    for (int j = 0; j < k; ++j) at[j] = srcs[j] + base * e;
    reduce_sources(block, at.data(), k, m, dtype, op);
    finish_reduce(block, m, dtype, op, world);
    for (int d = 0; d < ndst; ++d) {
      if (streaming) stream_copy(dsts[d] + base * e, block, m * e);
      else std::memcpy(dsts[d] + base * e, block, m * e);
    }
  }
}

}  // namespace artel::comm
