#include "artel/kernels/gemm.h"

#include <cblas.h>
#include <dnnl.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cctype>
#include <cstdlib>
#include <cstring>

#include "artel/core/error.h"
#include "artel/core/threads.h"
#include "artel/kernels/gemm_bf16.h"

namespace artel::kernels {
namespace {

std::atomic<GemmLibrary> g_library{GemmLibrary::onednn};
std::atomic<GemmPrecision> g_precision{GemmPrecision::fp32};

void onednn_sgemm(const GemmArgs& g) {
  // oneDNN parallelises with OpenMP over omp_get_max_threads(), a per-thread
  // setting: one, so that artel's split is the only one and no OpenMP team
  // of spinning threads is ever started.
  thread_local const bool single_threaded = (omp_set_num_threads(1), true);
  (void)single_threaded;
  dnnl_status_t st = dnnl_sgemm(g.trans_a ? 'T' : 'N', g.trans_b ? 'T' : 'N', g.m, g.n, g.k, g.alpha, g.a, g.lda, g.b,
                                g.ldb, g.beta, g.c, g.ldc);
  ARTEL_CHECK(st == dnnl_success, "oneDNN sgemm of (", g.m, " x ", g.k, ") by (", g.k, " x ", g.n,
              ") failed with status ", static_cast<int>(st));
}

void sgemm(const GemmArgs& g) {
  if (g.m == 0 || g.n == 0) return;
  if (g_library.load(std::memory_order_relaxed) == GemmLibrary::onednn) return onednn_sgemm(g);
  cblas_sgemm(CblasRowMajor, g.trans_a ? CblasTrans : CblasNoTrans, g.trans_b ? CblasTrans : CblasNoTrans,
              static_cast<int>(g.m), static_cast<int>(g.n), static_cast<int>(g.k), g.alpha, g.a,
              static_cast<int>(g.lda), g.b, static_cast<int>(g.ldb), g.beta, g.c, static_cast<int>(g.ldc));
}

// sgemm has no bias: the product is written first (beta = 0), then the bias
// added onto each row of this block of C (add_bias_rows says why).
void sgemm_then_bias(const GemmArgs& g) {
  GemmArgs product = g;
  product.bias = nullptr;
  sgemm(product);
  add_bias_rows(g.m, g.n, g.bias, g.c, g.ldc);
}

// A product with no terms (K = 0): C = beta·C, plus the bias. oneDNN's sgemm
// and bf16 gemm return at once and leave C as it was, even at beta 0, where
// it may be a fresh buffer's garbage.
void without_terms(const GemmArgs& g) {
  for (int64_t r = 0; r < g.m; ++r) {
    float* row = g.c + r * g.ldc;
    for (int64_t j = 0; j < g.n; ++j) row[j] = g.beta == 0.0f ? 0.0f : g.beta * row[j];
  }
  if (g.bias) add_bias_rows(g.m, g.n, g.bias, g.c, g.ldc);
}

// Below this many multiply-adds a GEMM is not worth splitting.
constexpr int64_t kMinSplitWork = 1 << 18;

thread_local GemmRecorder* t_recorder = nullptr;

// Runs `run` on blocks of C, one per thread: blocks of rows, or of columns
// when M is small, that keep the kernel's tiles whole. P is GemmArgs or
// Bf16Product, whose fields mean the same.
template <class P, class Run>
void split_product(const P& g, Run run) {
  int threads = num_threads();
  if (threads == 1 || g.m * g.n * g.k < kMinSplitWork) return run(g);
  if (g.m >= g.n || g.n < 64) {
    int64_t blocks = std::min<int64_t>(threads, (g.m + 15) / 16);
    parallel_for(blocks, 1, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        int64_t r0 = g.m * b / blocks / 16 * 16, r1 = b + 1 == blocks ? g.m : g.m * (b + 1) / blocks / 16 * 16;
        P part = g;
        part.m = r1 - r0;
        part.a = g.trans_a ? g.a + r0 : g.a + r0 * g.lda;
        part.c = g.c + r0 * g.ldc;
        run(part);
      }
    });
  } else {
    int64_t blocks = std::min<int64_t>(threads, (g.n + 15) / 16);
    parallel_for(blocks, 1, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        int64_t c0 = g.n * b / blocks / 16 * 16, c1 = b + 1 == blocks ? g.n : g.n * (b + 1) / blocks / 16 * 16;
        P part = g;
        part.n = c1 - c0;
        part.b = g.trans_b ? g.b + c0 * g.ldb : g.b + c0;
        part.c = g.c + c0;
        if (g.bias) part.bias = g.bias + c0;
        run(part);
      }
    });
  }
}

const uint16_t* rounded(const float* in, int64_t rows, int64_t cols, int64_t ld, std::vector<uint16_t>& out) {
  out.resize(static_cast<size_t>(rows * cols));
  round_operand(in, rows, cols, ld, out.data());
  return out.data();
}

thread_local RoundOperandsOnce* t_round_once = nullptr;

}  // namespace

// The rounding of one operand: kept by the innermost RoundOperandsOnce, or in
// this thread's scratch `spare` when there is none.
struct RoundedOperands {
  static const uint16_t* of(const float* in, int64_t rows, int64_t cols, int64_t ld, std::vector<uint16_t>& spare) {
    if (!t_round_once) return rounded(in, rows, cols, ld, spare);
    for (const RoundOperandsOnce::Kept& k : t_round_once->kept_)
      if (k.data == in && k.rows == rows && k.cols == cols && k.ld == ld) return k.bits.get();
    RoundOperandsOnce::Kept& k = t_round_once->kept_.emplace_back(
        RoundOperandsOnce::Kept{in, rows, cols, ld, std::make_unique_for_overwrite<uint16_t[]>(rows * cols)});
    round_operand(in, rows, cols, ld, k.bits.get());
    return k.bits.get();
  }
};

namespace {

// The mixed-precision product: both operands rounded once, as stored, then
// multiplied block by block as in fp32.
void gemm_bf16(const GemmArgs& g) {
  if (g.m == 0 || g.n == 0) return;
  thread_local std::vector<uint16_t> a16, b16;
  const bool trans_b = g.b16 && g.b16_transposed ? !g.trans_b : g.trans_b;  // how the bf16 B is stored
  Bf16Product p{g.trans_a, trans_b, g.m, g.n, g.k, g.alpha, nullptr, g.trans_a ? g.m : g.k,
                nullptr, trans_b ? g.k : g.n, g.beta, g.c, g.ldc, g.bias};
  p.a = g.a16 ? g.a16 : RoundedOperands::of(g.a, g.trans_a ? g.k : g.m, p.lda, g.lda, a16);
  p.b = g.b16 ? g.b16 : RoundedOperands::of(g.b, g.trans_b ? g.n : g.k, p.ldb, g.ldb, b16);
  split_product(p, bf16_matmul);
}

}  // namespace

void round_operand(const float* in, int64_t rows, int64_t cols, int64_t ld, uint16_t* out) {
  // Chunks of at least 16 Ki elements, so that a layer's weights (W2's are 16-64
  // Ki elements) round on every thread: with 64 Ki they rounded on the caller
  // alone, and W2's bf16 step at 2 threads was 1.3-1.6% slower (AMD Zen 5,
  // steps alternating between the two in one run); 8 Ki gained nothing more.
  parallel_for(rows, std::max<int64_t>(1, (16 << 10) / std::max<int64_t>(cols, 1)), [&](int64_t r0, int64_t r1) {
    round_to_bf16(in + r0 * ld, r1 - r0, cols, ld, out + r0 * cols);
  });
}

void round_operand_both(const float* in, int64_t rows, int64_t cols, uint16_t* out, uint16_t* out_t) {
  constexpr int64_t kTile = 16;  // chunks of whole 16-row tiles, which round_to_bf16_both transposes in registers
  const int64_t tiles = (rows + kTile - 1) / kTile;
  parallel_for(tiles, std::max<int64_t>(1, (64 << 10) / std::max<int64_t>(kTile * cols, 1)), [&](int64_t t0, int64_t t1) {
    round_to_bf16_both(in, rows, cols, t0 * kTile, std::min(rows, t1 * kTile), out, out_t);
  });
}

RoundOperandsOnce::RoundOperandsOnce() : outer_(t_round_once) { t_round_once = this; }
RoundOperandsOnce::~RoundOperandsOnce() { t_round_once = outer_; }

GemmLibrary parse_gemm_library(const std::string& name) {
  if (name == "onednn") return GemmLibrary::onednn;
  if (name == "openblas") return GemmLibrary::openblas;
  throw Error("unknown GEMM library '" + name + "'", "use onednn or openblas");
}

std::string to_string(GemmLibrary lib) { return lib == GemmLibrary::onednn ? "onednn" : "openblas"; }

void set_gemm_library(GemmLibrary lib) { g_library.store(lib); }

GemmPrecision parse_gemm_precision(const std::string& name) {
  if (name == "fp32") return GemmPrecision::fp32;
  if (name == "bf16") return GemmPrecision::bf16;
  throw Error("unknown precision '" + name + "'", "use fp32 or bf16");
}

std::string to_string(GemmPrecision p) { return p == GemmPrecision::fp32 ? "fp32" : "bf16"; }

std::string bf16_instructions() {
  const dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
  if (isa == dnnl_cpu_isa_avx512_core_amx) return "AMX";
  if (isa == dnnl_cpu_isa_avx512_core_bf16) return "AVX512_BF16";
  return "";
}

std::string bf16_slower_reason() {
  if (bf16_instructions() != "AVX512_BF16" || __builtin_cpu_is("amd")) return "";
  return "this Intel CPU has AVX512_BF16 but no AMX, and issues VDPBF16PS at half the products a cycle of its fp32 FMAs";
}

bool bf16_dx_reads_transposed_weights() {
  static const bool transposed = !__builtin_cpu_is("amd");
  return transposed;
}

void check_native_bf16() {
  if (bf16_instructions().empty())
    throw Error("this CPU has no native bf16 (no AVX512_BF16 or AMX; oneDNN sees " + gemm_kernels(GemmLibrary::onednn) +
                    "), and emulated bf16 is slower than fp32",
                "use --precision fp32");
}

void set_gemm_precision(GemmPrecision p) {
  if (p == GemmPrecision::bf16) check_native_bf16();
  g_precision.store(p);
}

GemmPrecision gemm_precision() { return g_precision.load(); }

std::string openblas_fallback_advice(const std::string& corename, bool avx512, bool avx2) {
  std::string core = corename;
  std::transform(core.begin(), core.end(), core.begin(), [](unsigned char c) { return std::tolower(c); });
  if (core != "prescott" || !(avx512 || avx2)) return "";
  return std::string("a fallback for a CPU it does not know; OPENBLAS_CORETYPE=") +
         (avx512 ? "SkylakeX gives it AVX-512 kernels" : "Haswell gives it AVX2 kernels");
}

std::string gemm_kernels(GemmLibrary lib) {
  if (lib == GemmLibrary::openblas) {
    const char* forced = std::getenv("OPENBLAS_CORETYPE");
    std::string version = OPENBLAS_VERSION;  // " OpenBLAS 0.3.21 "
    version.erase(version.find_last_not_of(' ') + 1).erase(0, version.find_first_not_of(' '));
    const std::string core = openblas_get_corename(), kernels = version + ", " + core + " kernels";
    if (forced) return kernels + " (forced by OPENBLAS_CORETYPE=" + forced + ")";
    const std::string advice = openblas_fallback_advice(core, __builtin_cpu_supports("avx512f"),
                                                        __builtin_cpu_supports("avx2"));
    return kernels + " (its pick for this CPU" + (advice.empty() ? "" : ": " + advice) + ")";
  }
  const dnnl_version_t* v = dnnl_version();
  std::string isa;
  switch (dnnl_get_effective_cpu_isa()) {
    case dnnl_cpu_isa_sse41: isa = "SSE4.1"; break;
    case dnnl_cpu_isa_avx: isa = "AVX"; break;
    case dnnl_cpu_isa_avx2: isa = "AVX2"; break;
    case dnnl_cpu_isa_avx2_vnni: isa = "AVX2 VNNI"; break;
    case dnnl_cpu_isa_avx512_core: isa = "AVX-512"; break;
    case dnnl_cpu_isa_avx512_core_vnni: isa = "AVX-512 VNNI"; break;
    case dnnl_cpu_isa_avx512_core_bf16: isa = "AVX-512 BF16"; break;
    case dnnl_cpu_isa_avx512_core_amx: isa = "AVX-512 AMX"; break;
    default: isa = "other"; break;
  }
  return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch) + ", " +
         isa + " kernels (compiled for this CPU)";
}

GemmRecorder::GemmRecorder() : outer_(t_recorder) { t_recorder = this; }
GemmRecorder::~GemmRecorder() { t_recorder = outer_; }

namespace {
thread_local ProductFlops* t_flops = nullptr;
}  // namespace

ProductFlops::ProductFlops() : outer_(t_flops) { t_flops = this; }
ProductFlops::~ProductFlops() { t_flops = outer_; }

namespace {
double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

ProductFlops::Product::Product(double flops) {
  if (!t_flops) return;
  for (ProductFlops* c = t_flops; c; c = c->outer_) c->flops_ += flops;
  start_ = now_seconds();
}

ProductFlops::Product::~Product() {
  if (start_ < 0) return;
  const double took = now_seconds() - start_;
  for (ProductFlops* c = t_flops; c; c = c->outer_) c->seconds_ += took;
}

void gemm(const GemmArgs& g) {
  if (t_recorder) t_recorder->calls_.push_back(g);
  const ProductFlops::Product product(2.0 * static_cast<double>(g.m) * static_cast<double>(g.n) *
                                      static_cast<double>(g.k));
  ARTEL_CHECK(!g.bias || g.beta == 0.0f, "a GEMM adds a bias only with beta 0, got beta ", g.beta);
  if (g.k == 0) return without_terms(g);
  if (g_precision.load(std::memory_order_relaxed) == GemmPrecision::bf16) return gemm_bf16(g);
  split_product(g, g.bias ? sgemm_then_bias : sgemm);
}

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, const float* b,
          float beta, float* c, const float* bias) {
  gemm(GemmArgs{trans_a, trans_b, m, n, k, alpha, a, trans_a ? m : k, b, trans_b ? k : n, beta, c, n, nullptr, nullptr, false,
                bias});
}

}  // namespace artel::kernels
