// GEMM through oneDNN (dnnl_sgemm) or OpenBLAS (cblas_sgemm), row-major,
// split over artel's threads.
//
//   C (M, N) = alpha · op(A) · op(B) + beta · C       (+ bias, a row of N, when given: with beta 0)
//   op(A) is (M, K): A itself (lda ≥ K) or, with trans_a, Aᵀ of a (K, M) A (lda ≥ M).
//   op(B) is (K, N): B itself (ldb ≥ N) or, with trans_b, Bᵀ of an (N, K) B (ldb ≥ K).
//
// Both libraries run single-threaded (core/threads.h; oneDNN's OpenMP team is
// set to one thread on every thread that calls it); gemm() cuts C into blocks
// of rows (or of columns when M is small) and runs one sgemm per thread, so
// the one thread setting governs everything and idle threads sleep.
//
// Which library: oneDNN by default. It compiles its kernels for the CPU it
// runs on (AVX-512 where there is one), whatever OPENBLAS_CORETYPE says;
// OpenBLAS is the library Debian's PyTorch calls, there for comparisons on
// the same kernels (`--gemm openblas`).
//
// Precision: fp32, or bf16 (`--precision bf16`, mixed precision): the inputs
// of every product are rounded to bf16 (round to nearest even) and multiplied
// by oneDNN's bf16 matmul or gemm (kernels/gemm_bf16.h's Bf16Kernel),
// accumulating and writing C in fp32. Only where the CPU multiplies bf16 natively
// (AVX512_BF16 or AMX); set_gemm_precision refuses it elsewhere rather than
// emulating it, which is slower than fp32.
//
//   set_gemm_library(parse_gemm_library("openblas"));
//   gemm_kernels();   // "OpenBLAS 0.3.21, Haswell kernels (forced by OPENBLAS_CORETYPE=Haswell)"
//   set_gemm_precision(GemmPrecision::bf16);   // throws on a CPU without native bf16
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace artel::kernels {

enum class GemmLibrary { onednn, openblas };

// "onednn" | "openblas"; throws Error naming the choices otherwise.
GemmLibrary parse_gemm_library(const std::string& name);
std::string to_string(GemmLibrary lib);
// Process-wide, like the thread count; onednn until set.
void set_gemm_library(GemmLibrary lib);
// What runs the products under `lib`: library, version and kernels, for
// benchmark headers (the same machine multiplies twice as fast with AVX-512).
std::string gemm_kernels(GemmLibrary lib);
// OpenBLAS falls back to its generic x86-64 kernels (Prescott: SSE3, a
// quarter of AVX-512's speed) on a CPU newer than itself, e.g. 0.3.21 on
// Emerald Rapids. On a machine with AVX-512 or AVX2 that is such a fallback:
// returns the advice naming the OPENBLAS_CORETYPE that restores the kernels
// (for a peer's numbers, such as PyTorch's, measured with them); else "".
std::string openblas_fallback_advice(const std::string& corename, bool avx512, bool avx2);

enum class GemmPrecision { fp32, bf16 };
// "fp32" | "bf16"; throws Error naming the choices otherwise.
GemmPrecision parse_gemm_precision(const std::string& name);
std::string to_string(GemmPrecision p);
// Process-wide, like the library; fp32 until set. bf16 throws Error (one line,
// naming the CPU's best instructions) where bf16_instructions() is "".
void set_gemm_precision(GemmPrecision p);
// Throws set_gemm_precision's Error where bf16_instructions() is "".
void check_native_bf16();
GemmPrecision gemm_precision();
// The instructions bf16 products run on here: "AMX" or "AVX512_BF16", or ""
// when the CPU (as oneDNN sees it; ONEDNN_MAX_CPU_ISA lowers it) has neither.
std::string bf16_instructions();
// Why bf16 products run slower than fp32's here, or "" where they run
// faster. An Intel CPU with AVX512_BF16 but no AMX (Cooper Lake, or a
// Sapphire or Emerald Rapids whose hypervisor hides AMX) issues VDPBF16PS,
// 32 products, once every two cycles, against two 16-product FMAs a cycle:
// on an Emerald Rapids (model 207, AMX hidden) one core ran 40 G products/s
// in bf16 against 85 in fp32, and GPT-2's step at 1 thread took 11,913 ms in
// bf16 against 6,824 in fp32. A run is told, not refused: bf16's numbers are
// the same on every machine, and only its speed is lost.
std::string bf16_slower_reason();
// Whether a linear layer's dX = dY·W should read a transposed bf16 copy of W
// (rounded in the same pass as W) rather than W as stored. oneDNN 2.6's bf16
// matmul ran dX 10% faster that way on Intel (model 167; GPT-2's step 2316 ->
// 2101 ms); on AMD Zen 5 both layouts ran alike (within 2% at W2's shapes,
// 3.5% at GPT-2's, neither always ahead), so there the copy is skipped: its
// transposing pass cost W2's step 0.1-0.4 ms.
bool bf16_dx_reads_transposed_weights();

struct GemmArgs {
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  float alpha = 1.0f;
  const float* a = nullptr;
  int64_t lda = 0;
  const float* b = nullptr;
  int64_t ldb = 0;
  float beta = 0.0f;
  float* c = nullptr;
  int64_t ldc = 0;
  // bf16 precision: A or B already rounded (round_operand: tight, as stored),
  // used instead of rounding a or b again; ignored in fp32. A linear layer
  // rounds its input and weight once, in forward, and backward reuses them,
  // as PyTorch's autocast caches its casts of the weights.
  const uint16_t* a16 = nullptr;
  const uint16_t* b16 = nullptr;
  // b16 holds op(B)'s transpose instead (tight, n rows of k): the layout
  // oneDNN's bf16 matmul runs fastest. A linear layer's dX = dY·W with Wᵀ
  // given this way measured 1.3-1.4x at GPT-2's widths and 1.6x at its head.
  bool b16_transposed = false;
  // A row of N added to every row of C, or null. Only with beta 0: a linear
  // layer's bias, which oneDNN's bf16 matmul adds in its output kernel (a
  // beta = 1 sum there costs 15% on GPT-2's wide products); after the
  // product on its sgemm and bf16 gemm (add_bias_rows).
  const float* bias = nullptr;
};

void gemm(const GemmArgs& g);

// Row-major shorthand with tight leading dimensions.
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          const float* b, float beta, float* c, const float* bias = nullptr);

// Rounds a stored (rows x cols, row stride ld) matrix to bf16, round to
// nearest even, into `out` (rows x cols, tight), split over the threads: an
// operand for GemmArgs::a16 / b16. Needs native bf16 (gemm_precision() bf16).
void round_operand(const float* in, int64_t rows, int64_t cols, int64_t ld, uint16_t* out);
// The same for a tight matrix, from one read, into `out` as stored and
// `out_t` transposed (cols x rows): a weight for forward and, transposed, for
// backward (GemmArgs::b16_transposed).
void round_operand_both(const float* in, int64_t rows, int64_t cols, uint16_t* out, uint16_t* out_t);

// While alive, the bf16 products called on this thread round each operand
// once: one met again (the same address, shape and stride) reuses its
// rounding. Only around products whose operands nothing writes meanwhile —
// a linear layer's backward, whose two products both read the output
// gradient (GPT-2's is 1024 x 50,304 at the head). No effect in fp32.
//
//   { RoundOperandsOnce once; gemm(dX = dY·W); gemm(dW = dYᵀ·X); }
class RoundOperandsOnce {
 public:
  RoundOperandsOnce();
  ~RoundOperandsOnce();
  RoundOperandsOnce(const RoundOperandsOnce&) = delete;
  RoundOperandsOnce& operator=(const RoundOperandsOnce&) = delete;

 private:
  friend struct RoundedOperands;
  struct Kept {
    const float* data;
    int64_t rows, cols, ld;
    std::unique_ptr<uint16_t[]> bits;  // left uninitialised until rounded into (no zero fill first)
  };
  std::vector<Kept> kept_;
  RoundOperandsOnce* outer_;
};

// While alive, keeps the arguments of every gemm() called on this thread, so
// a benchmark can replay a step's products alone — the floor under the rest
// of the step. Recorders nest; the innermost one records.
//
//   GemmRecorder rec;  run_step();  rec.calls();   // one GemmArgs per product
class GemmRecorder {
 public:
  GemmRecorder();
  ~GemmRecorder();
  GemmRecorder(const GemmRecorder&) = delete;
  GemmRecorder& operator=(const GemmRecorder&) = delete;
  const std::vector<GemmArgs>& calls() const { return calls_; }

 private:
  friend void gemm(const GemmArgs& g);
  std::vector<GemmArgs> calls_;
  GemmRecorder* outer_;
};

// While alive, counts the FLOPs of the matrix products run on this thread:
// 2·m·n·k a gemm(), and attention's q·kᵀ and p·v as whole products (4·B·T²·C
// forward, twice that backward), as the planner's GPT counts them though
// the kernel skips the masked half. What a model's forward costs in the
// planner's terms (plan/measured_costs.h). Counters nest; each counts.
//
//   ProductFlops f;  model.forward(x);  f.flops();
class ProductFlops {
 public:
  ProductFlops();
  ~ProductFlops();
  ProductFlops(const ProductFlops&) = delete;
  ProductFlops& operator=(const ProductFlops&) = delete;
  double flops() const { return flops_; }
  // Seconds the counted products took: the rest of a piece's time is its
  // streaming work (plan/measured_costs.h).
  double seconds() const { return seconds_; }

  // What a product kernel holds while it runs: adds its `flops` to every
  // live counter of this thread now, and its seconds when it ends.
  class Product {
   public:
    explicit Product(double flops);
    ~Product();
    Product(const Product&) = delete;
    Product& operator=(const Product&) = delete;

   private:
    double start_ = -1;  // seconds; -1 when no counter is live
  };

 private:
  double flops_ = 0, seconds_ = 0;
  ProductFlops* outer_;
};

}  // namespace artel::kernels
