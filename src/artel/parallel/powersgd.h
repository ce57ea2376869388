// PowerSGD (Vogels et al., NeurIPS 2019): data parallelism's gradient
// reduction at a low rank, PyTorch's `powerSGD_hook` for artel's DDP buckets.
//
// Each gradient of two or more dimensions is viewed as a matrix M (n, m)
// (its first dimension by the rest) and replaced by a rank-r approximation
// of the average over ranks, from two all-reduces of r(n + m) numbers in
// place of one of n·m:
//
//   M += e                   error feedback: what earlier steps' approximations left out (this rank's)
//   P = M Q                  (n, r); Q (m, r) is last step's (warm start), the same on every rank
//   P = avg(P), orthonormalised (Gram-Schmidt on its columns)
//   Q = avg(Mᵀ P)            (m, r)
//   e = M − P Qᵀ,  M = P Qᵀ  (= P Pᵀ avg(M): the average projected on P's columns)
//
// Gradients where that would not save at least half the bytes
// ((n + m)·r·2 ≥ n·m: biases, norms, small matrices) are averaged
// uncompressed, packed beside the Ps in the first all-reduce. For the first
// `start_step` steps every gradient is averaged uncompressed (PyTorch's
// start_powerSGD_iter): early gradients change too fast for the warm start.
//
// One PowerSgdBucket per DDP bucket; the bucket's reduction becomes three
// phases (distributed_data_parallel.cpp):
//
//   work = ps.begin(bucket);   // as the bucket fills, during backward: M += e, P = M Q, all-reduce
//   work->wait(); work = ps.middle(bucket);   // orthonormalise P, Q = Mᵀ P, all-reduce
//   work->wait(); ps.end(bucket);             // M = P Qᵀ, e = M_in − M
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "artel/comm/process_group.h"

namespace artel::parallel {

struct PowerSgdOptions {
  int rank = 4;             // r: columns of P and Q
  int64_t start_step = 10;  // steps averaged uncompressed before compression starts
  uint64_t seed = 0;        // Q's first values (every rank draws the same)
  std::string algorithm = "auto";  // of both all-reduces (comm::AllReduceOptions)
};

// A gradient in a bucket: its elements from `offset`, viewed as rows x cols.
struct BucketMatrix {
  int64_t offset = 0;
  int64_t rows = 0, cols = 0;  // cols 1: a vector, never compressed
};

class PowerSgdBucket {
 public:
  PowerSgdBucket(std::vector<BucketMatrix> grads, comm::ProcessGroup& group, const PowerSgdOptions& opts);

  // Compressed this step (a step past start_step), or plainly all-reduced.
  bool compressing() const { return steps_ >= opts_.start_step; }
  // Phase 1: error feedback, P = M Q; all-reduce [uncompressed gradients | Ps].
  comm::WorkPtr begin(float* bucket);
  // Phase 2, after begin's work: the uncompressed averages copied back,
  // P orthonormalised, Q = Mᵀ P; all-reduce Qs.
  comm::WorkPtr middle(float* bucket);
  // Phase 3, after middle's work: M = P Qᵀ, e = M_in − M. The step is done.
  void end(float* bucket);
  // Plain steps (before start_step) call this instead of the phases.
  void count_plain_step() { ++steps_; }

  // Elements all-reduced per compressed step (both all-reduces), and the
  // bucket's elements uncompressed: the ratio is the compression.
  int64_t compressed_numel() const { return first_.numel() + second_.numel(); }
  // How many of the bucket's gradients are compressed.
  int compressed_count() const { return static_cast<int>(compressed_.size()); }

  // What a checkpoint keeps for an exact resume: per compressed gradient,
  // its offset in the bucket, Q (cols, r; alike on every rank) and this
  // rank's error (rows, cols), as live tensors a resume reads into; and the
  // steps counted so far.
  struct Kept {
    int64_t offset;
    Tensor q, error;
  };
  std::vector<Kept> kept() const;
  int64_t steps() const { return steps_; }
  void set_steps(int64_t steps) { steps_ = steps; }

 private:
  struct Compressed {
    BucketMatrix m;
    int64_t p_offset, q_offset;  // in first_ and second_
    Tensor q, error;             // (cols, r) kept from step to step; (rows, cols) this rank's
  };
  comm::ProcessGroup& group_;
  PowerSgdOptions opts_;
  std::vector<BucketMatrix> plain_;     // averaged uncompressed, packed first in first_
  std::vector<Compressed> compressed_;
  Tensor first_, second_;               // registered: [plain | Ps] and [Qs]
  // end()'s P·Qᵀ is formed this many bytes of rows at a time: within a
  // core's L2 (512 KiB on AMD Zen 3 and 4, 2 MiB on Intel Sapphire Rapids).
  static constexpr int64_t kEndBlockBytes = 256 << 10;
  int64_t steps_ = 0;
};

// Whether a rows x cols gradient is compressed at rank r: it must save at
// least half the bytes (PyTorch's min_compression_rate 2).
bool powersgd_compresses(int64_t rows, int64_t cols, int rank);

// Orthonormalises the columns of the row-major (rows, cols) matrix in place
// (modified Gram-Schmidt); a column that is (numerically) in the span of
// the ones before it becomes zero.
void orthonormalize_columns(float* a, int64_t rows, int64_t cols);

}  // namespace artel::parallel
