#include "artel/core/threads.h"

#include <cblas.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "artel/core/error.h"

namespace artel {
namespace {

inline void cpu_relax() { __builtin_ia32_pause(); }

// Waits until `word` differs from `old`: spins for about kSpinMicros, then sleeps
// on the futex behind std::atomic::wait.
constexpr int kSpinMicros = 50;
template <class T>
void spin_then_wait(const std::atomic<T>& word, T old) {
  auto start = std::chrono::steady_clock::now();
  for (int i = 0;; ++i) {
    if (word.load(std::memory_order_acquire) != old) return;
    cpu_relax();
    if ((i & 63) == 63 &&
        std::chrono::steady_clock::now() - start > std::chrono::microseconds(kSpinMicros))
      break;
  }
  while (word.load(std::memory_order_acquire) == old) word.wait(old, std::memory_order_acquire);
}

thread_local bool t_in_parallel = false;

class Pool {
 public:
  // Every GEMM asks the pool for its thread count first, so this runs before
  // OpenBLAS's first call: left alone, Debian's OpenBLAS starts a spinning
  // thread per core, and a program that never calls set_num_threads would
  // have them fight artel's threads and every other process for the cores.
  Pool() { openblas_set_num_threads(1); }
  ~Pool() { resize(1); }

  void resize(int n) {
    std::lock_guard lock(use_);
    stop_workers();
    threads_ = n;
    uint64_t now = generation_.load();
    for (int i = 1; i < n; ++i) workers_.emplace_back([this, now] { worker_loop(now); });
  }
  int threads() const { return threads_; }

  void run(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
    int64_t max_chunks = grain > 0 ? (n + grain - 1) / grain : n;
    int64_t chunks = std::min<int64_t>({threads_, max_chunks, 0xffff});  // job_word holds up to 0xffff
    if (chunks <= 1 || t_in_parallel) {
      if (n > 0) fn(0, n);
      return;
    }
    std::unique_lock lock(use_, std::try_to_lock);
    if (!lock.owns_lock()) {
      fn(0, n);
      return;
    }
    fn_ = &fn;
    n_ = n;
    done_.store(0, std::memory_order_relaxed);
    const uint64_t generation = generation_.load(std::memory_order_relaxed) + 1;
    // Chunk 0 is the caller's, taken before the job is published; workers
    // claim the others. Ops that split their rows alike then find them in the
    // cache of the core that wrote them. Left to whoever claimed first, a
    // worker took chunk 0 in 15% of W2's regions, and its step at 2 threads
    // ran 1.2-2.5% slower in bf16 and 0.7-1.2% in fp32 (steps alternating
    // between the two in one run, AMD Zen 5 guest).
    claim_.store(job_word(generation, chunks) + 1, std::memory_order_release);  // publishes fn_ and n_ too
    generation_.store(generation, std::memory_order_release);
    generation_.notify_all();
    t_in_parallel = true;
    run_chunk(0, chunks);
    work_chunks(generation);
    // Only the chunks are waited for, not the workers: a worker still asleep
    // finds the job taken when it wakes. Waiting for every worker to check in
    // cost the caller the wake-up whenever one had gone to sleep: 35-115 µs
    // after a serial stretch of 80 µs to 1 ms (AMD Zen 5 guest, 2 vCPUs),
    // where this job's 2 chunks took 1 µs.
    while (true) {
      int d = done_.load(std::memory_order_acquire);
      if (d == chunks) break;
      spin_then_wait(done_, d);
    }
    fn_ = nullptr;
    if (failed_.load(std::memory_order_acquire)) {  // every chunk has run: the first error goes to the caller
      failed_.store(false, std::memory_order_relaxed);
      std::rethrow_exception(std::exchange(error_, nullptr));
    }
  }

 private:
  // The job's claims in one word, so that a worker can take a chunk only of
  // the job it woke for: its generation (low 32 bits), its chunk count and
  // the next chunk to take (16 bits each, chunks <= threads).
  static uint64_t job_word(uint64_t generation, int64_t chunks) {
    return (generation & 0xffffffffu) << 32 | static_cast<uint64_t>(chunks) << 16;
  }

  // Takes chunks of job `generation` until none is left or a newer job is up.
  // A chunk taken keeps the job from finishing, so fn_ and n_ stay this job's
  // until its chunk is counted done.
  void work_chunks(uint64_t generation) {
    t_in_parallel = true;
    uint64_t word = claim_.load(std::memory_order_acquire);
    while (true) {
      const uint64_t chunks = word >> 16 & 0xffff, next = word & 0xffff;
      if ((word >> 32) != (generation & 0xffffffffu) || next >= chunks) break;
      if (!claim_.compare_exchange_weak(word, word + 1, std::memory_order_acq_rel, std::memory_order_acquire))
        continue;
      run_chunk(static_cast<int64_t>(next), static_cast<int64_t>(chunks));
      word = claim_.load(std::memory_order_acquire);
    }
    t_in_parallel = false;
  }

  // Chunk c of `all`, claimed by this thread, then counted done.
  void run_chunk(int64_t c, int64_t all) {
    try {
      (*fn_)(n_ * c / all, n_ * (c + 1) / all);
    } catch (...) {  // kept for the caller, not left to end the process on a worker
      if (!failed_.exchange(true, std::memory_order_acq_rel)) error_ = std::current_exception();
    }
    if (done_.fetch_add(1, std::memory_order_acq_rel) + 1 == all) done_.notify_one();
  }

  // `seen` is the generation when the worker was made: a job published before
  // the thread got to run must still count as new.
  void worker_loop(uint64_t seen) {
    while (true) {
      spin_then_wait(generation_, seen);
      seen = generation_.load(std::memory_order_acquire);
      if (stopping_.load(std::memory_order_acquire)) return;
      work_chunks(seen);
    }
  }

  void stop_workers() {
    stopping_.store(true, std::memory_order_release);
    generation_.fetch_add(1, std::memory_order_release);
    generation_.notify_all();
    for (auto& t : workers_) t.join();
    workers_.clear();
    stopping_.store(false, std::memory_order_release);
  }

  std::mutex use_;  // one parallel_for at a time; others run inline
  std::vector<std::thread> workers_;
  int threads_ = 1;
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> stopping_{false};
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0;
  std::atomic<uint64_t> claim_{0};  // job_word: the job's generation, chunks and next chunk
  std::atomic<int> done_{0};        // chunks of the job finished
  std::atomic<bool> failed_{false};  // a chunk threw: error_ holds the first exception
  std::exception_ptr error_;
};

Pool& pool() {
  static Pool p;
  return p;
}

}  // namespace

void set_num_threads(int n) {
  ARTEL_CHECK(n >= 1, "number of threads must be at least 1, got ", n);
  openblas_set_num_threads(1);
  if (n != pool().threads()) pool().resize(n);
}

int num_threads() { return pool().threads(); }

std::vector<int> allowed_cores() {
  std::vector<int> cores;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) cores.push_back(c);
  } else {
    for (int c = 0; c < static_cast<int>(std::thread::hardware_concurrency()); ++c) cores.push_back(c);
  }
  return cores;
}

int available_cores() { return std::max(1, static_cast<int>(allowed_cores().size())); }

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  pool().run(n, grain, fn);
}

}  // namespace artel
