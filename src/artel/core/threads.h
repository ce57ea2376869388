// Thread control: one setting governs the GEMM libraries and artel's own
// parallel loops.
//
// OpenBLAS and oneDNN are kept single-threaded (kernels/gemm.h); artel splits
// work (GEMMs included) over its own pool, whose idle threads spin for a few
// microseconds and then sleep on a futex. Spinning forever is what makes two
// busy-waiting runtimes on two cores slower than one (Debian's PyTorch and
// OpenBLAS both spin: two threads on two cores ran up to 2x slower than one).
//
//   set_num_threads(2);
//   parallel_for(rows, 16, [&](int64_t begin, int64_t end) { ... });
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace artel {

// n >= 1. Also sets OpenBLAS to one thread: artel splits GEMMs itself.
void set_num_threads(int n);
int num_threads();
// Cores this process may run on (sched_getaffinity): their ids in increasing
// order, and how many.
std::vector<int> allowed_cores();
int available_cores();

// Calls fn(begin, end) on disjoint chunks covering [0, n), each at least `grain`
// long (except possibly the last), using up to num_threads() threads. The
// caller runs the first chunk, so ops that split their rows alike keep each
// block on one core. Runs inline when the work is small, when called from
// inside a parallel_for, or when another thread is already using the pool.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

}  // namespace artel
