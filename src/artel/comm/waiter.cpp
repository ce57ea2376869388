#include "artel/comm/waiter.h"

#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <ctime>
#include <utility>

#include "artel/core/threads.h"

namespace artel::comm {
namespace {

// A core each: spin long enough to catch a peer that is a little behind
// (measured: 2 ranks, 4 KiB all_reduce, see docs/COLLECTIVES.md), then yield
// a while before sleeping. Oversubscribed: the peer we wait for may be
// queued behind us on our own core, so give it the core almost at once.
constexpr auto kOwnCoreSpin = std::chrono::microseconds(50);
constexpr auto kOwnCoreYield = std::chrono::microseconds(300);
constexpr auto kSharedCoreSpin = std::chrono::nanoseconds(0);
constexpr auto kSharedCoreYield = std::chrono::microseconds(100);
constexpr auto kMinSpin = std::chrono::microseconds(1);
constexpr auto kContested = std::chrono::microseconds(5);  // a sched_yield this long ran someone else
constexpr auto kSleepSlice = std::chrono::milliseconds(20);
constexpr auto kProgressSlice = std::chrono::milliseconds(1);  // while a backend's messages are in flight
std::atomic<WaitProgress> g_progress{nullptr};

// The backend's progress, if any: whether its messages are still in flight.
bool progress() {
  const WaitProgress f = g_progress.load(std::memory_order_acquire);
  return f != nullptr && f();
}

long futex(std::atomic<uint32_t>* word, int op, uint32_t val, const timespec* ts) {
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, val, ts, nullptr, 0);
}

// Throws if a rank we wait for has left the group or its process is gone.
// A rank departs (release) after everything it published, so a peer that
// arrived and then left between our look at ready() and at `missing` shows
// its arrival to ready() once its departure is seen (acquire): that is no error.
void check_alive(const WaitTarget& w, const std::vector<int>& missing, const std::function<bool()>& ready,
                 const OpContext& ctx) {
  for (int r : missing) {
    RankControl* rc = w.layout->rank_control(w.base, r);
    auto rank = [&] { return ctx.describe() + ": " + ctx.rank_name(r); };
    if (rc->departed.load(std::memory_order_acquire) && !ready())
      throw Error(rank() + " left the group (its group was destroyed) before arriving",
                  "every rank must issue the same collectives before destroying the group");
    int pid = rc->pid.load(std::memory_order_relaxed);
    if (pid > 0 && pid != getpid() && kill(pid, 0) != 0 && errno == ESRCH && !ready())
      throw Error(rank() + " (pid " + std::to_string(pid) + ") died", "see that worker's output for the cause");
  }
}

}  // namespace

WaitPolicy WaitPolicy::for_ranks(int ranks) {
  static const int cores = available_cores();
  if (ranks <= cores) return {kOwnCoreSpin, kOwnCoreYield, kOwnCoreSpin};
  return {kSharedCoreSpin, kSharedCoreYield, kSharedCoreSpin};
}

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
  WaitPolicy& p = *w.policy;
  for (int i = 1; p.spin.count() > 0; ++i) {  // spin
    __builtin_ia32_pause();
    if (ready()) return;
    if ((i & 31) == 0 && Clock::now() - start > p.spin) break;
  }
  for (auto [now, turn] = std::pair{Clock::now(), 0}; now - start < p.yield; ++turn) {  // let a rank sharing our core run
    if ((turn & 15) == 0) progress();  // a backend's messages, every 16th turn: a probe costs more than a yield
    sched_yield();
    const auto after = Clock::now();
    const bool contested = after - now > kContested;
    now = after;
    if (contested) p.spin = std::min<Clock::duration>(kMinSpin, p.max_spin);
    if (ready()) {
      if (!contested) p.spin = std::min<Clock::duration>(p.max_spin, 2 * p.spin);
      return;
    }
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
    const Clock::duration most = progress() ? Clock::duration(kProgressSlice) : Clock::duration(kSleepSlice);
    auto slice = std::min<Clock::duration>(most, ctx.deadline - now);
    auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(slice).count();
    timespec ts{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
    futex(&h->futex, FUTEX_WAIT, word, &ts);
    h->sleepers.fetch_sub(1, std::memory_order_relaxed);
    if (ready()) return;
    check_alive(w, missing(), ready, ctx);
  }
}

void set_wait_progress(WaitProgress f) { g_progress.store(f, std::memory_order_release); }

}  // namespace artel::comm
