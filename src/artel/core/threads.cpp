#include "artel/core/threads.h"

#include <cblas.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
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
    int64_t chunks = std::min<int64_t>(threads_, max_chunks);
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
    chunks_ = chunks;
    next_.store(0, std::memory_order_relaxed);
    // Every thread checks in once per job, so no worker can still be reading
    // this job's fields when the next one is published.
    pending_.store(static_cast<int>(workers_.size()) + 1, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
    generation_.notify_all();
    work_chunks();
    while (true) {
      int p = pending_.load(std::memory_order_acquire);
      if (p == 0) break;
      spin_then_wait(pending_, p);
    }
    fn_ = nullptr;
  }

 private:
  void work_chunks() {
    t_in_parallel = true;
    for (int64_t c; (c = next_.fetch_add(1, std::memory_order_relaxed)) < chunks_;) {
      int64_t begin = n_ * c / chunks_, end = n_ * (c + 1) / chunks_;
      (*fn_)(begin, end);
    }
    t_in_parallel = false;
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_one();
  }

  // `seen` is the generation when the worker was made: a job published before
  // the thread got to run must still count as new.
  void worker_loop(uint64_t seen) {
    while (true) {
      spin_then_wait(generation_, seen);
      seen = generation_.load(std::memory_order_acquire);
      if (stopping_.load(std::memory_order_acquire)) return;
      work_chunks();
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
  int64_t n_ = 0, chunks_ = 0;
  std::atomic<int64_t> next_{0};
  std::atomic<int> pending_{0};
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
