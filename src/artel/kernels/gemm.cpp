#include "artel/kernels/gemm.h"

#include <cblas.h>

#include <algorithm>

#include "artel/core/threads.h"

namespace artel::kernels {
namespace {

void sgemm(const GemmArgs& g) {
  if (g.m == 0 || g.n == 0) return;
  cblas_sgemm(CblasRowMajor, g.trans_a ? CblasTrans : CblasNoTrans, g.trans_b ? CblasTrans : CblasNoTrans,
              static_cast<int>(g.m), static_cast<int>(g.n), static_cast<int>(g.k), g.alpha, g.a,
              static_cast<int>(g.lda), g.b, static_cast<int>(g.ldb), g.beta, g.c, static_cast<int>(g.ldc));
}

// Below this many multiply-adds a GEMM is not worth splitting.
constexpr int64_t kMinSplitWork = 1 << 18;

thread_local GemmRecorder* t_recorder = nullptr;

}  // namespace

GemmRecorder::GemmRecorder() : outer_(t_recorder) { t_recorder = this; }
GemmRecorder::~GemmRecorder() { t_recorder = outer_; }

void gemm(const GemmArgs& g) {
  if (t_recorder) t_recorder->calls_.push_back(g);
  int threads = num_threads();
  if (threads == 1 || g.m * g.n * g.k < kMinSplitWork) return sgemm(g);
  // Split the larger of M and N into blocks that keep the kernel's tiles whole.
  if (g.m >= g.n || g.n < 64) {
    int64_t blocks = std::min<int64_t>(threads, (g.m + 15) / 16);
    parallel_for(blocks, 1, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        int64_t r0 = g.m * b / blocks / 16 * 16, r1 = b + 1 == blocks ? g.m : g.m * (b + 1) / blocks / 16 * 16;
        GemmArgs part = g;
        part.m = r1 - r0;
        part.a = g.trans_a ? g.a + r0 : g.a + r0 * g.lda;
        part.c = g.c + r0 * g.ldc;
        sgemm(part);
      }
    });
  } else {
    int64_t blocks = std::min<int64_t>(threads, (g.n + 15) / 16);
    parallel_for(blocks, 1, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        int64_t c0 = g.n * b / blocks / 16 * 16, c1 = b + 1 == blocks ? g.n : g.n * (b + 1) / blocks / 16 * 16;
        GemmArgs part = g;
        part.n = c1 - c0;
        part.b = g.trans_b ? g.b + c0 * g.ldb : g.b + c0;
        part.c = g.c + c0;
        sgemm(part);
      }
    });
  }
}

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, const float* b,
          float beta, float* c) {
  gemm(GemmArgs{trans_a, trans_b, m, n, k, alpha, a, trans_a ? m : k, b, trans_b ? k : n, beta, c, n});
}

}  // namespace artel::kernels
