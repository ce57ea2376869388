// GEMM through OpenBLAS (cblas_sgemm, row-major), split over artel's threads.
//
//   C (M, N) = alpha · op(A) · op(B) + beta · C
//   op(A) is (M, K): A itself (lda ≥ K) or, with trans_a, Aᵀ of a (K, M) A (lda ≥ M).
//   op(B) is (K, N): B itself (ldb ≥ N) or, with trans_b, Bᵀ of an (N, K) B (ldb ≥ K).
//
// OpenBLAS runs single-threaded (core/threads.h); gemm() cuts C into blocks of
// rows (or of columns when M is small) and runs one sgemm per thread, so the
// one thread setting governs everything and idle threads sleep.
#pragma once

#include <cstdint>
#include <vector>

namespace artel::kernels {

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
};

void gemm(const GemmArgs& g);

// Row-major shorthand with tight leading dimensions.
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          const float* b, float beta, float* c);

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

}  // namespace artel::kernels
