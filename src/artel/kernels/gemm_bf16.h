// bf16 matrix products: oneDNN's matmul on bf16 inputs with fp32 accumulation
// and an fp32 C, the mixed-precision half of kernels/gemm.h.
//
//   Bf16Matrix a = to_bf16(g.a, rows, cols, g.lda);     // rounded to nearest even
//   bf16_matmul(part);                                  // C = alpha · op(A) · op(B) + beta · C
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace artel::kernels {

// Rounds a rows x cols fp32 matrix (row stride ld) to bf16, round to nearest
// even, into `out` (rows x cols, tight). Needs AVX512_BF16 (the caller checks).
void round_to_bf16(const float* in, int64_t rows, int64_t cols, int64_t ld, uint16_t* out);
// Rows [r0, r1) of the same rounding of a tight rows x cols matrix, written
// twice from one read: as stored into `out` and transposed into `out_t`
// (cols x rows, tight).
void round_to_bf16_both(const float* in, int64_t rows, int64_t cols, int64_t r0, int64_t r1, uint16_t* out,
                        uint16_t* out_t);

// One product on bf16 operands; the fields mean what GemmArgs's do.
struct Bf16Product {
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  float alpha = 1.0f;
  const uint16_t* a = nullptr;
  int64_t lda = 0;
  const uint16_t* b = nullptr;
  int64_t ldb = 0;
  float beta = 0.0f;
  float* c = nullptr;
  int64_t ldc = 0;
  const float* bias = nullptr;
};

// The longest K one oneDNN bf16 matmul is given: a longer one runs as chunks
// of K, each added onto C. oneDNN 2.6's matmul at GPT-2's head (dX = dY·W, K =
// 50,304) ran at half its rate at 8,192: 210 ms whole, 103-105 ms as chunks
// of 4,192-8,384 (Intel model 167, one thread).
constexpr int64_t kBf16MaxK = 8192;

// Which of oneDNN's bf16 kernels multiply: its matmul primitive (brgemm, on
// AMX where the CPU has it) or its BLAS-like gemm (dnnl_gemm_bf16bf16f32).
// `automatic` (the default) takes gemm on AMD with AVX512_BF16: there, at one
// thread on Zen 4, oneDNN 2.6's matmul ran GPT-2's products at 171-202
// GFLOP/s and gemm at 195-220, of 230 that VDPBF16PS can issue (the step's
// products 4,229 -> 3,836 ms); W2's small products ran alike on both. The
// matmul everywhere else: AMX runs only through it, and Intel without AMX was
// not measured. Process-wide, like the precision.
enum class Bf16Kernel { automatic, matmul, gemm };
void set_bf16_kernel(Bf16Kernel k);
// The kernel bf16 products run on here: matmul or gemm, never automatic.
Bf16Kernel bf16_kernel();
// "oneDNN's bf16 matmul" or "oneDNN's bf16 gemm", for a run's header.
std::string bf16_kernel_name();

// C's m rows (ldc apart) += the bias row (n), after a product written
// without one: oneDNN's sgemm and bf16 gemm have no bias. Laying the bias into
// C first and adding the product onto it (beta = 1) read C's cold memory
// twice (a step's output buffers come back from the heap cold): GPT-2's 1024
// x 3072 fc product took 350 ms a step that way in fp32 against 292 ms
// replayed on warm scratch, 36 ms of it the bias fill alone.
void add_bias_rows(int64_t m, int64_t n, const float* bias, float* c, int64_t ldc);

// Runs on the calling thread alone. Primitives are kept per thread by shape.
void bf16_matmul(const Bf16Product& p);

}  // namespace artel::kernels
