#include "artel/kernels/gemm_bf16.h"

#include <immintrin.h>
#include <omp.h>

#include <dnnl.hpp>
#include <atomic>
#include <map>
#include <string>
#include <tuple>
#include <unordered_map>

#include "artel/core/dtype.h"
#include "artel/core/error.h"
#include "artel/kernels/simd.h"

// oneDNN's BLAS-like bf16 GEMM, row-major as dnnl_sgemm. libdnnl exports it
// (DNNL_API) beside dnnl_sgemm since oneDNN 1.2; its public header leaves it
// out, and oneDNN's own tests declare it as here.
extern "C" dnnl_status_t dnnl_gemm_bf16bf16f32(char transa, char transb, dnnl_dim_t m, dnnl_dim_t n, dnnl_dim_t k,
                                               float alpha, const uint16_t* a, dnnl_dim_t lda, const uint16_t* b,
                                               dnnl_dim_t ldb, float beta, float* c, dnnl_dim_t ldc);

namespace artel::kernels {
namespace {

std::atomic<Bf16Kernel> g_bf16_kernel{Bf16Kernel::automatic};

// The product through dnnl_gemm_bf16bf16f32, which has no bias: written
// first, then the bias added (add_bias_rows says why in that order).
void gemm_product(const Bf16Product& p) {
  const dnnl_status_t st = dnnl_gemm_bf16bf16f32(p.trans_a ? 'T' : 'N', p.trans_b ? 'T' : 'N', p.m, p.n, p.k, p.alpha,
                                                 p.a, p.lda, p.b, p.ldb, p.beta, p.c, p.ldc);
  ARTEL_CHECK(st == dnnl_success, "oneDNN bf16 gemm of (", p.m, " x ", p.k, ") by (", p.k, " x ", p.n,
              ") failed with status ", static_cast<int>(st));
  if (p.bias) add_bias_rows(p.m, p.n, p.bias, p.c, p.ldc);
}

__attribute__((target("avx512f,avx512bf16"))) void round_row(const float* in, int64_t n, uint16_t* out) {
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    __m256bh h = _mm512_cvtneps_pbh(_mm512_loadu_ps(in + j));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + j), reinterpret_cast<__m256i&>(h));
  }
  for (; j < n; ++j) out[j] = bf16(in[j]).bits;
}

// A free function, not a lambda: GCC does not give a lambda its enclosing
// function's target, so on a CPU without AVX512 (no -march=native for it)
// the conversion would not compile inside one.
__attribute__((target("avx512f,avx512bf16"))) inline __m256i to_bits(v16 x) {
  __m256bh h = _mm512_cvtneps_pbh(reinterpret_cast<__m512&>(x));
  return reinterpret_cast<__m256i&>(h);
}

const dnnl::engine& cpu_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// A product's shape and scalars: what a primitive is made for.
using Shape = std::tuple<bool, bool, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, float, float, bool>;

dnnl::memory::desc matrix(int64_t rows, int64_t cols, bool transposed, int64_t ld, dnnl::memory::data_type type) {
  // A stored matrix of ld-strided rows, read as (rows x cols) or, transposed, as its transpose.
  const dnnl::memory::dims strides = transposed ? dnnl::memory::dims{1, ld} : dnnl::memory::dims{ld, 1};
  return dnnl::memory::desc({rows, cols}, type, strides);
}

// A primitive with its memory objects and arguments, made once per shape:
// a call only points the memories at its operands (building them per call
// costs microseconds, which add up over W2's hundred small products a step).
struct Prepared {
  dnnl::matmul primitive;
  dnnl::memory a, b, c, bias;
  std::unordered_map<int, dnnl::memory> args;
};

Prepared& prepared(const Bf16Product& p) {
  thread_local std::map<Shape, Prepared> primitives;
  const Shape shape{p.trans_a, p.trans_b, p.m, p.n, p.k, p.lda, p.ldb, p.ldc, p.alpha, p.beta, p.bias != nullptr};
  auto it = primitives.find(shape);
  if (it != primitives.end()) return it->second;
  using dt = dnnl::memory::data_type;
  const dnnl::memory::desc a = matrix(p.m, p.k, p.trans_a, p.lda, dt::bf16), b = matrix(p.k, p.n, p.trans_b, p.ldb, dt::bf16),
                           c = matrix(p.m, p.n, false, p.ldc, dt::f32), bias = matrix(1, p.n, false, p.n, dt::f32);
  dnnl::primitive_attr attr;
  if (p.alpha != 1.0f) attr.set_output_scales(0, {p.alpha});
  if (p.beta != 0.0f) {
    dnnl::post_ops sum;
    sum.append_sum(p.beta);
    attr.set_post_ops(sum);
  }
  Prepared made;
  try {
    made.primitive = dnnl::matmul(dnnl::matmul::primitive_desc(
        p.bias ? dnnl::matmul::desc(a, b, bias, c) : dnnl::matmul::desc(a, b, c), attr, cpu_engine()));
  } catch (const dnnl::error& e) {
    throw Error("oneDNN has no bf16 matmul for (" + std::to_string(p.m) + " x " + std::to_string(p.k) + ") by (" +
                std::to_string(p.k) + " x " + std::to_string(p.n) + "): " + e.what());
  }
  const dnnl::engine& engine = cpu_engine();
  made.a = dnnl::memory(a, engine, DNNL_MEMORY_NONE);
  made.b = dnnl::memory(b, engine, DNNL_MEMORY_NONE);
  made.c = dnnl::memory(c, engine, DNNL_MEMORY_NONE);
  made.args = {{DNNL_ARG_SRC, made.a}, {DNNL_ARG_WEIGHTS, made.b}, {DNNL_ARG_DST, made.c}};
  if (p.bias) {
    made.bias = dnnl::memory(bias, engine, DNNL_MEMORY_NONE);
    made.args.emplace(DNNL_ARG_BIAS, made.bias);
  }
  return primitives.emplace(shape, std::move(made)).first->second;
}

}  // namespace

void round_to_bf16(const float* in, int64_t rows, int64_t cols, int64_t ld, uint16_t* out) {
  for (int64_t r = 0; r < rows; ++r) round_row(in + r * ld, cols, out + r * cols);
}

__attribute__((target("avx512f,avx512bf16"))) void round_to_bf16_both(const float* in, int64_t rows, int64_t cols,
                                                                       int64_t r0, int64_t r1, uint16_t* out,
                                                                       uint16_t* out_t) {
  // 16 x 16 tiles through registers: 16 rows rounded and stored, then the
  // tile transposed in fp32 (rounding commutes with it) and stored as 16 rows
  // of the transpose. Ragged edges element by element.
  int64_t r = r0;
  for (; r + kLanes <= r1; r += kLanes) {
    int64_t c = 0;
    for (; c + kLanes <= cols; c += kLanes) {
      v16 tile[kLanes];
      for (int64_t i = 0; i < kLanes; ++i) {
        tile[i] = load<v16>(in + (r + i) * cols + c);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + (r + i) * cols + c), to_bits(tile[i]));
      }
      transpose(tile);
      for (int64_t i = 0; i < kLanes; ++i)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out_t + (c + i) * rows + r), to_bits(tile[i]));
    }
    for (int64_t i = r; i < r + kLanes; ++i)
      for (int64_t cc = c; cc < cols; ++cc) out[i * cols + cc] = out_t[cc * rows + i] = bf16(in[i * cols + cc]).bits;
  }
  for (; r < r1; ++r)
    for (int64_t c = 0; c < cols; ++c) out[r * cols + c] = out_t[c * rows + r] = bf16(in[r * cols + c]).bits;
}

void set_bf16_kernel(Bf16Kernel k) { g_bf16_kernel.store(k); }

Bf16Kernel bf16_kernel() {
  const Bf16Kernel k = g_bf16_kernel.load(std::memory_order_relaxed);
  if (k != Bf16Kernel::automatic) return k;
  static const Bf16Kernel mine = __builtin_cpu_is("amd") && dnnl_get_effective_cpu_isa() == dnnl_cpu_isa_avx512_core_bf16
                                     ? Bf16Kernel::gemm
                                     : Bf16Kernel::matmul;
  return mine;
}

void add_bias_rows(int64_t m, int64_t n, const float* bias, float* c, int64_t ldc) {
  for (int64_t r = 0; r < m; ++r) {
    float* __restrict row = c + r * ldc;
    for (int64_t j = 0; j < n; ++j) row[j] += bias[j];
  }
}

std::string bf16_kernel_name() {
  return bf16_kernel() == Bf16Kernel::gemm ? "oneDNN's bf16 gemm" : "oneDNN's bf16 matmul";
}

void bf16_matmul(const Bf16Product& p) {
  if (p.m == 0 || p.n == 0) return;
  if (p.k > kBf16MaxK) {  // equal chunks of K; the first carries beta and the bias, the rest add on
    const int64_t chunks = (p.k + kBf16MaxK - 1) / kBf16MaxK;
    for (int64_t i = 0; i < chunks; ++i) {
      const int64_t k0 = p.k * i / chunks, k1 = p.k * (i + 1) / chunks;
      Bf16Product part = p;
      part.k = k1 - k0;
      part.a = p.trans_a ? p.a + k0 * p.lda : p.a + k0;
      part.b = p.trans_b ? p.b + k0 : p.b + k0 * p.ldb;
      if (i > 0) part.beta = 1.0f, part.bias = nullptr;
      bf16_matmul(part);
    }
    return;
  }
  // As for sgemm (gemm.cpp): oneDNN's OpenMP team stays at one thread, artel splits.
  thread_local const bool single_threaded = (omp_set_num_threads(1), true);
  (void)single_threaded;
  if (bf16_kernel() == Bf16Kernel::gemm) return gemm_product(p);
  thread_local dnnl::stream stream(cpu_engine());
  Prepared& made = prepared(p);
  made.a.set_data_handle(const_cast<uint16_t*>(p.a));
  made.b.set_data_handle(const_cast<uint16_t*>(p.b));
  made.c.set_data_handle(p.c);
  if (p.bias) made.bias.set_data_handle(const_cast<float*>(p.bias));
  made.primitive.execute(stream, made.args);
  stream.wait();
}

}  // namespace artel::kernels
