#include "artel/comm/waiter.h"

#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>

namespace artel::comm {
namespace {

constexpr auto kSpin = std::chrono::microseconds(1);
constexpr auto kYield = std::chrono::microseconds(100);
constexpr auto kSleepSlice = std::chrono::milliseconds(20);

long futex(std::atomic<uint32_t>* word, int op, uint32_t val, const timespec* ts) {
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, val, ts, nullptr, 0);
}

// Throws if a rank we wait for has left the group or its process is gone.
void check_alive(const WaitTarget& w, const std::vector<int>& missing, const OpContext& ctx) {
  for (int r : missing) {
    RankControl* rc = w.layout->rank_control(w.base, r);
    if (rc->departed.load(std::memory_order_acquire))
      throw Error(ctx.describe() + ": rank " + std::to_string(r) + " left the group (its group was destroyed) before arriving",
                  "every rank must issue the same collectives before destroying the group");
    int pid = rc->pid.load(std::memory_order_relaxed);
    if (pid > 0 && pid != getpid() && kill(pid, 0) != 0 && errno == ESRCH)
      throw Error(ctx.describe() + ": rank " + std::to_string(r) + " (pid " + std::to_string(pid) + ") died",
                  "see that worker's output for the cause");
  }
}

}  // namespace

void notify(SegmentHeader* h) {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (h->sleepers.load(std::memory_order_relaxed) == 0) return;
  h->futex.fetch_add(1, std::memory_order_seq_cst);
  futex(&h->futex, FUTEX_WAKE, INT32_MAX, nullptr);
}

void wait_until(const WaitTarget& w, const std::function<bool()>& ready, const OpContext& ctx,
                const std::function<std::vector<int>()>& missing) {
  if (ready()) return;
  auto start = Clock::now();
  for (int i = 1;; ++i) {  // spin
    __builtin_ia32_pause();
    if (ready()) return;
    if ((i & 31) == 0 && Clock::now() - start > kSpin) break;
  }
  while (Clock::now() - start < kYield) {  // let a rank sharing our core run
    sched_yield();
    if (ready()) return;
  }
  SegmentHeader* h = SegmentLayout::header(w.base);
  for (;;) {
    h->sleepers.fetch_add(1, std::memory_order_seq_cst);
    uint32_t word = h->futex.load(std::memory_order_seq_cst);
    if (ready()) {
      h->sleepers.fetch_sub(1, std::memory_order_relaxed);
      return;
    }
    auto now = Clock::now();
    if (now >= ctx.deadline || ctx.abort_requested()) {
      h->sleepers.fetch_sub(1, std::memory_order_relaxed);
      if (ctx.abort_requested()) throw ctx.abort_error();
      throw ctx.timeout_error(missing());
    }
    auto slice = std::min<Clock::duration>(kSleepSlice, ctx.deadline - now);
    auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(slice).count();
    timespec ts{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
    futex(&h->futex, FUTEX_WAIT, word, &ts);
    h->sleepers.fetch_sub(1, std::memory_order_relaxed);
    if (ready()) return;
    check_alive(w, missing(), ctx);
  }
}

}  // namespace artel::comm
