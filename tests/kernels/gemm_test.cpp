#include "artel/kernels/gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <vector>

#include "artel/core/dtype.h"
#include "artel/core/error.h"
#include "artel/core/threads.h"
#include "artel/kernels/gemm_bf16.h"

namespace artel::kernels {
namespace {

// C = alpha · op(A) · op(B) + beta · C by the definition, in double.
std::vector<float> reference(const GemmArgs& g, std::vector<float> c) {
  for (int64_t i = 0; i < g.m; ++i)
    for (int64_t j = 0; j < g.n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < g.k; ++p) {
        double a = g.trans_a ? g.a[p * g.lda + i] : g.a[i * g.lda + p];
        double b = g.trans_b ? g.b[j * g.ldb + p] : g.b[p * g.ldb + j];
        s += a * b;
      }
      float& out = c[static_cast<size_t>(i * g.ldc + j)];
      out = static_cast<float>(g.alpha * s + g.beta * out);
    }
  return c;
}

struct Shape {
  int64_t m, n, k;
};

// Every transposition, padded leading dimensions, alpha and beta, shapes that
// split over threads by rows (M large) and by columns (M small): both
// libraries must compute the same product as the definition.
TEST(Gemm, BothLibrariesMatchTheDefinition) {
  for (GemmLibrary lib : {GemmLibrary::onednn, GemmLibrary::openblas})
    for (int threads : {1, 2})
      for (Shape s : {Shape{5, 7, 3}, Shape{130, 70, 40}, Shape{3, 300, 200}})
        for (bool ta : {false, true})
          for (bool tb : {false, true}) {
            set_gemm_library(lib);
            set_num_threads(threads);
            const int64_t pad = 3;
            GemmArgs g{.trans_a = ta, .trans_b = tb, .m = s.m, .n = s.n, .k = s.k, .alpha = 0.5f};
            g.lda = (ta ? s.m : s.k) + pad;
            g.ldb = (tb ? s.k : s.n) + pad;
            g.ldc = s.n + pad;
            g.beta = 2.0f;
            std::vector<float> a(static_cast<size_t>((ta ? s.k : s.m) * g.lda)),
                b(static_cast<size_t>((tb ? s.n : s.k) * g.ldb)), c(static_cast<size_t>(s.m * g.ldc));
            for (size_t i = 0; i < a.size(); ++i) a[i] = std::sin(0.37f * static_cast<float>(i));
            for (size_t i = 0; i < b.size(); ++i) b[i] = std::cos(0.23f * static_cast<float>(i));
            for (size_t i = 0; i < c.size(); ++i) c[i] = 0.1f * static_cast<float>(i % 7);
            g.a = a.data(), g.b = b.data(), g.c = c.data();
            const std::vector<float> want = reference(g, c);
            gemm(g);
            for (size_t i = 0; i < c.size(); ++i)
              ASSERT_NEAR(c[i], want[i], 1e-4 * (1 + std::abs(want[i])))
                  << to_string(lib) << " threads " << threads << " " << s.m << "x" << s.n << "x" << s.k << " ta " << ta
                  << " tb " << tb << " at " << i;
          }
  set_gemm_library(GemmLibrary::onednn);
  set_num_threads(1);
}

float bf16_rounded(float x) { return static_cast<float>(bf16(x)); }

// bf16 products: the definition on the operands rounded to bf16 (to nearest
// even), accumulated in fp32 — on both of oneDNN's kernels, every
// transposition, padded leading dimensions, alpha and beta, split by rows and
// by columns.
TEST(Gemm, Bf16IsTheProductOfTheRoundedOperands) {
  if (bf16_instructions().empty()) GTEST_SKIP() << "this CPU has no native bf16";
  set_gemm_precision(GemmPrecision::bf16);
  for (Bf16Kernel kernel : {Bf16Kernel::matmul, Bf16Kernel::gemm})
  for (int threads : {1, 2})
    for (Shape s : {Shape{5, 7, 3}, Shape{130, 70, 40}, Shape{3, 300, 200}})
      for (bool ta : {false, true})
        for (bool tb : {false, true})
          for (float beta : {0.0f, 1.0f, 2.0f}) {
            set_bf16_kernel(kernel);
            set_num_threads(threads);
            const int64_t pad = 3;
            GemmArgs g{.trans_a = ta, .trans_b = tb, .m = s.m, .n = s.n, .k = s.k, .alpha = beta == 2.0f ? 0.5f : 1.0f};
            g.lda = (ta ? s.m : s.k) + pad;
            g.ldb = (tb ? s.k : s.n) + pad;
            g.ldc = s.n + pad;
            g.beta = beta;
            std::vector<float> a(static_cast<size_t>((ta ? s.k : s.m) * g.lda)),
                b(static_cast<size_t>((tb ? s.n : s.k) * g.ldb)), c(static_cast<size_t>(s.m * g.ldc));
            for (size_t i = 0; i < a.size(); ++i) a[i] = std::sin(0.37f * static_cast<float>(i));
            for (size_t i = 0; i < b.size(); ++i) b[i] = std::cos(0.23f * static_cast<float>(i));
            for (size_t i = 0; i < c.size(); ++i) c[i] = 0.1f * static_cast<float>(i % 7);
            std::vector<float> a16 = a, b16 = b;
            for (float& x : a16) x = bf16_rounded(x);
            for (float& x : b16) x = bf16_rounded(x);
            GemmArgs rounded = g;
            rounded.a = a16.data(), rounded.b = b16.data();
            const std::vector<float> want = reference(rounded, c);
            const std::vector<float> unrounded = (g.a = a.data(), g.b = b.data(), reference(g, c));
            g.c = c.data();
            gemm(g);
            double off_by_rounding = 0;
            for (size_t i = 0; i < c.size(); ++i) {
              ASSERT_NEAR(c[i], want[i], 1e-4 * (1 + std::abs(want[i])))
                  << bf16_kernel_name() << " threads " << threads << " " << s.m << "x" << s.n << "x" << s.k << " ta "
                  << ta << " tb " << tb << " beta " << beta << " at " << i;
              off_by_rounding = std::max(off_by_rounding, std::abs(static_cast<double>(c[i]) - unrounded[i]));
            }
            // The inputs really were rounded: fp32 products of these operands differ.
            if (s.k > 3) {
              EXPECT_GT(off_by_rounding, 1e-4) << s.m << "x" << s.n << "x" << s.k;
            }
          }
  set_bf16_kernel(Bf16Kernel::automatic);
  set_gemm_precision(GemmPrecision::fp32);
  set_num_threads(1);
}

// The automatic choice resolves to a kernel: gemm on AMD with AVX512_BF16,
// the matmul elsewhere (AMX runs only through it).
TEST(Gemm, Bf16KernelAutomaticIsResolved) {
  if (bf16_instructions().empty()) GTEST_SKIP() << "this CPU has no native bf16";
  set_bf16_kernel(Bf16Kernel::automatic);
  const bool gemm_here = __builtin_cpu_is("amd") && bf16_instructions() == "AVX512_BF16";
  EXPECT_EQ(bf16_kernel(), gemm_here ? Bf16Kernel::gemm : Bf16Kernel::matmul);
  set_bf16_kernel(Bf16Kernel::matmul);
  EXPECT_EQ(bf16_kernel_name(), "oneDNN's bf16 matmul");
  set_bf16_kernel(Bf16Kernel::automatic);
}

// round_operand_both writes the rounding as stored and transposed, bit for bit
// round_operand's, for whole 16 x 16 tiles and ragged edges, over threads; a
// product given the transposed rounding (b16_transposed) is the product of
// the rounded operands, B transposed or not.
TEST(Gemm, ATransposedRoundingGivesTheSameProduct) {
  if (bf16_instructions().empty()) GTEST_SKIP() << "this CPU has no native bf16";
  set_gemm_precision(GemmPrecision::bf16);
  for (int threads : {1, 2})
    for (Shape s : {Shape{16, 16, 16}, Shape{37, 45, 33}, Shape{130, 70, 40}}) {
      set_num_threads(threads);
      for (bool tb : {false, true}) {
        const int64_t rows = tb ? s.n : s.k, cols = tb ? s.k : s.n;  // B as stored
        std::vector<float> a(static_cast<size_t>(s.m * s.k)), b(static_cast<size_t>(rows * cols)),
            c(static_cast<size_t>(s.m * s.n));
        for (size_t i = 0; i < a.size(); ++i) a[i] = std::sin(0.37f * static_cast<float>(i));
        for (size_t i = 0; i < b.size(); ++i) b[i] = std::cos(0.23f * static_cast<float>(i)) * 1.001f;
        std::vector<uint16_t> plain(b.size()), both(b.size()), transposed(b.size());
        round_operand(b.data(), rows, cols, cols, plain.data());
        round_operand_both(b.data(), rows, cols, both.data(), transposed.data());
        ASSERT_EQ(both, plain) << rows << "x" << cols;
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t col = 0; col < cols; ++col)
            ASSERT_EQ(transposed[static_cast<size_t>(col * rows + r)], plain[static_cast<size_t>(r * cols + col)])
                << rows << "x" << cols << " at " << r << "," << col;
        std::vector<float> a16 = a, b16 = b;
        for (float& x : a16) x = bf16_rounded(x);
        for (float& x : b16) x = bf16_rounded(x);
        GemmArgs g{.trans_b = tb, .m = s.m, .n = s.n, .k = s.k, .a = a16.data(), .lda = s.k, .b = b16.data(),
                   .ldb = cols, .ldc = s.n};
        const std::vector<float> want = reference(g, c);
        g.a = a.data(), g.b = b.data(), g.c = c.data(), g.b16 = transposed.data(), g.b16_transposed = true;
        gemm(g);
        for (size_t i = 0; i < c.size(); ++i)
          ASSERT_NEAR(c[i], want[i], 1e-4 * (1 + std::abs(want[i])))
              << "threads " << threads << " " << s.m << "x" << s.n << "x" << s.k << " tb " << tb << " at " << i;
      }
    }
  set_gemm_precision(GemmPrecision::fp32);
  set_num_threads(1);
}

// A bf16 product with K beyond kBf16MaxK runs as chunks of K: still the one
// product of the rounded operands, with beta and the bias applied once, for
// every transposition.
TEST(Gemm, ALongKRunsInChunksAsOneProduct) {
  if (bf16_instructions().empty()) GTEST_SKIP() << "this CPU has no native bf16";
  set_gemm_precision(GemmPrecision::bf16);
  const Shape s{5, 7, 2 * kBf16MaxK + 123};
  for (Bf16Kernel kernel : {Bf16Kernel::matmul, Bf16Kernel::gemm})
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (float beta : {0.0f, 0.5f}) {
        std::vector<float> a(static_cast<size_t>(s.m * s.k)), b(static_cast<size_t>(s.k * s.n)),
            c(static_cast<size_t>(s.m * s.n), 2.0f), bias(static_cast<size_t>(s.n));
        for (size_t i = 0; i < a.size(); ++i) a[i] = bf16_rounded(std::sin(0.37f * static_cast<float>(i)));
        for (size_t i = 0; i < b.size(); ++i) b[i] = bf16_rounded(std::cos(0.23f * static_cast<float>(i)));
        for (size_t j = 0; j < bias.size(); ++j) bias[j] = static_cast<float>(j);
        GemmArgs g{.trans_a = ta, .trans_b = tb, .m = s.m, .n = s.n, .k = s.k, .a = a.data(), .lda = ta ? s.m : s.k,
                   .b = b.data(), .ldb = tb ? s.k : s.n, .beta = beta, .ldc = s.n};
        std::vector<float> want = reference(g, c);
        if (beta == 0.0f) {
          g.bias = bias.data();
          for (size_t i = 0; i < want.size(); ++i) want[i] += bias[i % static_cast<size_t>(s.n)];
        }
        g.c = c.data();
        set_bf16_kernel(kernel);
        gemm(g);
        for (size_t i = 0; i < c.size(); ++i)
          ASSERT_NEAR(c[i], want[i], 1e-3 * (1 + std::abs(want[i])))
              << bf16_kernel_name() << " ta " << ta << " tb " << tb << " beta " << beta;
      }
  set_bf16_kernel(Bf16Kernel::automatic);
  set_gemm_precision(GemmPrecision::fp32);
}

// A bias row (beta 0) is added to every row, in fp32 and in bf16 (on both
// kernels), split by rows and by columns.
TEST(Gemm, BiasRowIsAddedToEveryRow) {
  for (GemmPrecision precision : {GemmPrecision::fp32, GemmPrecision::bf16})
  for (Bf16Kernel kernel : {Bf16Kernel::matmul, Bf16Kernel::gemm})
    for (int threads : {1, 2})
      for (Shape s : {Shape{130, 70, 40}, Shape{3, 300, 200}}) {
        if (precision == GemmPrecision::bf16 && bf16_instructions().empty()) continue;
        set_gemm_precision(precision);
        set_bf16_kernel(kernel);
        set_num_threads(threads);
        std::vector<float> a(static_cast<size_t>(s.m * s.k), 0.25f), b(static_cast<size_t>(s.k * s.n), 0.5f),
            bias(static_cast<size_t>(s.n)), c(static_cast<size_t>(s.m * s.n), 99.0f);
        for (size_t j = 0; j < bias.size(); ++j) bias[j] = static_cast<float>(j);
        gemm(false, false, s.m, s.n, s.k, 1.0f, a.data(), b.data(), 0.0f, c.data(), bias.data());
        for (int64_t i = 0; i < s.m; ++i)
          for (int64_t j = 0; j < s.n; ++j)
            ASSERT_FLOAT_EQ(c[static_cast<size_t>(i * s.n + j)], 0.125f * static_cast<float>(s.k) + static_cast<float>(j))
                << to_string(precision) << " " << bf16_kernel_name() << " threads " << threads << " at " << i << ","
                << j;
        EXPECT_THROW(gemm(false, false, s.m, s.n, s.k, 1.0f, a.data(), b.data(), 1.0f, c.data(), bias.data()), Error);
      }
  set_bf16_kernel(Bf16Kernel::automatic);
  set_gemm_precision(GemmPrecision::fp32);
  set_num_threads(1);
}

// A product with no terms (K = 0) leaves beta·C, plus the bias at beta 0, on
// every library, precision and bf16 kernel: C starts as garbage (NaN) at beta
// 0, as a fresh buffer may.
TEST(Gemm, AnEmptySumLeavesBetaTimesC) {
  struct Case {
    GemmLibrary library;
    GemmPrecision precision;
    Bf16Kernel kernel;
  };
  std::vector<Case> cases = {{GemmLibrary::onednn, GemmPrecision::fp32, Bf16Kernel::automatic},
                             {GemmLibrary::openblas, GemmPrecision::fp32, Bf16Kernel::automatic}};
  if (!bf16_instructions().empty())
    for (Bf16Kernel k : {Bf16Kernel::matmul, Bf16Kernel::gemm}) cases.push_back({GemmLibrary::onednn, GemmPrecision::bf16, k});
  const std::vector<float> a(4, 1.0f), b(4, 1.0f), bias = {1.0f, 2.0f, 3.0f};
  for (const Case& k : cases) {
    set_gemm_library(k.library);
    set_gemm_precision(k.precision);
    set_bf16_kernel(k.kernel);
    std::vector<float> c(6, std::nanf(""));
    gemm(false, false, 2, 3, 0, 1.0f, a.data(), b.data(), 0.0f, c.data(), bias.data());
    EXPECT_EQ(c, (std::vector<float>{1, 2, 3, 1, 2, 3})) << to_string(k.library) << " " << to_string(k.precision);
    c.assign(6, 4.0f);
    gemm(false, false, 2, 3, 0, 1.0f, a.data(), b.data(), 0.5f, c.data());
    EXPECT_EQ(c, std::vector<float>(6, 2.0f)) << to_string(k.library) << " " << to_string(k.precision);
  }
  set_bf16_kernel(Bf16Kernel::automatic);
  set_gemm_precision(GemmPrecision::fp32);
  set_gemm_library(GemmLibrary::onednn);
}

// Inside RoundOperandsOnce an operand met again is not rounded again (its
// first rounding is reused: the scope promises nothing writes it); outside,
// every product rounds what it is given.
TEST(Gemm, RoundOperandsOnceReusesARoundingOnlyInsideItsScope) {
  if (bf16_instructions().empty()) GTEST_SKIP() << "this CPU has no native bf16";
  set_gemm_precision(GemmPrecision::bf16);
  std::vector<float> a(16 * 16, 1.0f), b(16 * 16, 1.0f), c(16 * 16);
  {
    RoundOperandsOnce once;
    gemm(false, false, 16, 16, 16, 1.0f, a.data(), b.data(), 0.0f, c.data());
    EXPECT_EQ(c[0], 16.0f);
    a[0] = 3.0f;  // breaks the scope's promise: the first rounding is used
    gemm(false, false, 16, 16, 16, 1.0f, a.data(), b.data(), 0.0f, c.data());
    EXPECT_EQ(c[0], 16.0f);
  }
  gemm(false, false, 16, 16, 16, 1.0f, a.data(), b.data(), 0.0f, c.data());
  EXPECT_EQ(c[0], 18.0f);
  set_gemm_precision(GemmPrecision::fp32);
}

TEST(Gemm, PrecisionsByName) {
  EXPECT_EQ(parse_gemm_precision("bf16"), GemmPrecision::bf16);
  EXPECT_EQ(parse_gemm_precision(to_string(GemmPrecision::fp32)), GemmPrecision::fp32);
  EXPECT_THROW(parse_gemm_precision("fp16"), Error);
  const std::string isa = bf16_instructions();
  EXPECT_TRUE(isa.empty() || isa == "AVX512_BF16" || isa == "AMX") << isa;
}

size_t thread_count() {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/task")) ++n;
  return n;
}

// oneDNN parallelises with OpenMP, whose idle threads spin: at one artel
// thread a product must start no thread at all (ctest runs each test in its
// own process, so nothing else has started any).
TEST(Gemm, OneDnnStartsNoThreadsOfItsOwn) {
  set_gemm_library(GemmLibrary::onednn);
  set_num_threads(1);
  const size_t before = thread_count();
  std::vector<float> a(512 * 512, 0.5f), b(512 * 512, 0.25f), c(512 * 512);
  gemm(false, false, 512, 512, 512, 1.0f, a.data(), b.data(), 0.0f, c.data());
  EXPECT_FLOAT_EQ(c[0], 512 * 0.125f);
  EXPECT_EQ(thread_count(), before);
}

TEST(Gemm, LibrariesByName) {
  EXPECT_EQ(parse_gemm_library("onednn"), GemmLibrary::onednn);
  EXPECT_EQ(parse_gemm_library(to_string(GemmLibrary::openblas)), GemmLibrary::openblas);
  EXPECT_THROW(parse_gemm_library("mkl"), Error);
  EXPECT_NE(gemm_kernels(GemmLibrary::onednn).find("oneDNN"), std::string::npos);
  EXPECT_NE(gemm_kernels(GemmLibrary::openblas).find("OpenBLAS"), std::string::npos);
}

// OpenBLAS's generic kernels on a machine that has better ones are a
// fallback, and the advice names the core type that restores them.
TEST(Gemm, OpenblasFallbackOnAKnownIsaGetsAdvice) {
  EXPECT_EQ(openblas_fallback_advice("Prescott", true, true),
            "a fallback for a CPU it does not know; OPENBLAS_CORETYPE=SkylakeX gives it AVX-512 kernels");
  EXPECT_NE(openblas_fallback_advice("PRESCOTT", false, true).find("OPENBLAS_CORETYPE=Haswell"), std::string::npos);
  EXPECT_EQ(openblas_fallback_advice("Prescott", false, false), "");  // the right kernels for an SSE3 machine
  EXPECT_EQ(openblas_fallback_advice("SkylakeX", true, true), "");
  EXPECT_EQ(openblas_fallback_advice("Haswell", true, true), "");      // chosen or forced: not a fallback
}

}  // namespace
}  // namespace artel::kernels
