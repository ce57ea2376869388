// The collective suite: one body that checks every collective, dtype, reduce
// op, algorithm and awkward size on a group. It throws artel::Error on the
// first wrong element, so it runs the same inside a test thread (backend
// "thread") or a forked worker process (backend "shm").
//
//   comm::spawn_threads(4, [](comm::ProcessGroup& pg) { run_collective_suite(pg); });
#pragma once

#include <cmath>
#include <initializer_list>
#include <string>
#include <vector>

#include "artel/comm/process_group.h"

namespace artel::comm::testing {

// Values every dtype holds exactly, and whose sums/products over 8 ranks too.
inline double value(int rank, int64_t i, ReduceOp op) {
  if (op == ReduceOp::prod) return 1 + ((i + rank) % 3 == 0);     // 1 or 2
  return static_cast<double>((i * 7 + rank * 3) % 11) - 3;          // -3..7
}

// The reduction the library must produce, rounded the way the dtype rounds.
inline double expected(int world, int64_t i, ReduceOp op, DType dtype) {
  double acc = value(0, i, op);
  for (int r = 1; r < world; ++r) {
    double v = value(r, i, op);
    switch (op) {
      case ReduceOp::sum:
      case ReduceOp::avg: acc += v; break;
      case ReduceOp::prod: acc *= v; break;
      case ReduceOp::max: acc = std::max(acc, v); break;
      case ReduceOp::min: acc = std::min(acc, v); break;
    }
  }
  if (op != ReduceOp::avg) return acc;
  switch (dtype) {
    case DType::f32: return static_cast<float>(acc) / static_cast<float>(world);
    case DType::f64: return acc / world;
    case DType::i32:
    case DType::i64: return static_cast<double>(static_cast<int64_t>(acc) / world);
    case DType::bf16: return static_cast<float>(bf16(static_cast<float>(acc) / static_cast<float>(world)));
  }
  return 0;
}

inline void check_equal(const Tensor& t, int64_t i, double want, const std::string& what) {
  double got = element(t, i);
  if (got != want)
    throw Error(what + ": element " + std::to_string(i) + " is " + std::to_string(got) + ", expected " + std::to_string(want));
}

inline const std::vector<DType>& all_dtypes() {
  static const std::vector<DType> d = {DType::f32, DType::f64, DType::i32, DType::i64, DType::bf16};
  return d;
}
inline const std::vector<ReduceOp>& all_ops() {
  static const std::vector<ReduceOp> o = {ReduceOp::sum, ReduceOp::avg, ReduceOp::max, ReduceOp::min, ReduceOp::prod};
  return o;
}

struct SuiteOptions {
  std::vector<int64_t> sizes = {0, 1, 2, 7, 13, 61, 1031, 4099};  // primes and sizes not divisible by N
  int sizes_per_case = 3;   // each (op, dtype, algorithm) case runs this many sizes, rotating through `sizes`
  bool registered = true;   // also run on ProcessGroup::alloc tensors
  std::vector<DType> dtypes = all_dtypes();
  std::vector<ReduceOp> ops = all_ops();
  // false for backends without shared memory (mpi): the direct-read algorithms
  // are left out and "shared" runs as "auto" (there: the library's own).
  bool shared_memory = true;

  // The algorithms of `names` this backend can run.
  std::vector<std::string> algorithms(std::initializer_list<const char*> names) const {
    std::vector<std::string> out;
    for (std::string a : names) {
      if (!shared_memory && (a == "one_shot" || a == "two_shot")) continue;
      out.push_back(!shared_memory && a == "shared" ? "auto" : a);
    }
    return out;
  }

  // Calls fn(count, variant) for case number `k`: sizes_per_case sizes and a
  // variant (0 in place, 1 out of place, 2 registered) that rotate with k, so
  // every size meets every case kind over the suite without the full product.
  template <class Fn>
  void for_sizes(int k, Fn fn) const {
    const int m = static_cast<int>(sizes.size()), per = std::min(sizes_per_case, m);
    for (int s = 0; s < per; ++s) fn(sizes[(k + s * (m / per)) % m], (k + s) % (registered ? 3 : 2));
  }
};

std::string tag(const char* op, const std::string& algo, DType d, ReduceOp o, int64_t n, bool in_place, bool reg);

void check_all_reduce(ProcessGroup& pg, const SuiteOptions& so);
void check_broadcast_reduce(ProcessGroup& pg, const SuiteOptions& so);
void check_gather_family(ProcessGroup& pg, const SuiteOptions& so);
void check_point_to_point(ProcessGroup& pg);

inline void run_collective_suite(ProcessGroup& pg, const SuiteOptions& so = {}) {
  check_all_reduce(pg, so);
  check_broadcast_reduce(pg, so);
  check_gather_family(pg, so);
  check_point_to_point(pg);
  pg.barrier()->wait();
}

}  // namespace artel::comm::testing

#include "collective_suite_impl.h"
