#include "artel/comm/mpi/mpi_env.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "artel/comm/waiter.h"

namespace artel::comm::mpi {
namespace {

std::mutex init_mu;
bool we_initialized = false;
std::atomic<bool> unclean{false};

// Note [Progress of buffered sends]: the probe runs under pump_mu, and
// finalising stops it under the same lock, so it never calls into MPI after.
std::mutex pump_mu;
bool pump_stopped = false;
std::atomic<int> sends_in_flight{0};

bool progress_buffered_sends() {
  if (sends_in_flight.load(std::memory_order_relaxed) <= 0) return false;
  std::lock_guard lock(pump_mu);
  if (pump_stopped) return false;
  int flag = 0;
  MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_SELF, &flag, MPI_STATUS_IGNORE);  // drives MPI's progress engine
  return true;
}

void finalize_at_exit() {
  {
    std::lock_guard lock(pump_mu);
    pump_stopped = true;
  }
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized || unclean.load()) return;  // Note [Finalize at exit]
  MPI_Finalize();
}

// Watchdog slots: one per blocking call in flight (one per group at most, as
// a group runs one op at a time). A slot holds its deadline in ns since the
// clock's epoch (0: free, -1: fired) and the op, to name it when it fires;
// whoever moves the deadline away from its value first (the guard finishing,
// or the watchdog firing) wins, so the op is never read after it is gone.
constexpr int kSlots = 64;
struct Slot {
  std::atomic<int64_t> deadline_ns{0};
  std::atomic<bool> taken{false};
  const OpContext* ctx = nullptr;  // these two written before deadline_ns is set (release)
  std::string stuck;
};
Slot slots[kSlots];
std::once_flag watchdog_started;

int64_t to_ns(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

[[noreturn]] void watchdog_loop() {
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const int64_t now = to_ns(Clock::now());
    for (auto& s : slots) {
      int64_t d = s.deadline_ns.load(std::memory_order_acquire);
      if (d <= 0 || now < d || !s.deadline_ns.compare_exchange_strong(d, -1)) continue;
      std::string what = s.ctx->timeout_error({}, s.stuck).what();
      int rank = 0;
      MPI_Comm_rank(MPI_COMM_WORLD, &rank);
      std::fprintf(stderr, "artel: rank %d: error: %s; MPI cannot cancel a blocking collective, so the job is aborted\n",
                   rank, what.c_str());
      std::fflush(stderr);
      MPI_Abort(MPI_COMM_WORLD, 1);
      std::_Exit(1);
    }
  }
}

}  // namespace

void buffered_sends_in_flight(int change) {
  if (change > 0) set_wait_progress(progress_buffered_sends);
  sends_in_flight.fetch_add(change, std::memory_order_relaxed);
}

void ensure_initialized() {
  std::lock_guard lock(init_mu);
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (finalized) throw Error("the mpi backend cannot start: MPI was already finalised in this process");
  int provided = 0;
  if (!initialized) {
    // OpenMPI's tcp transport carries both directions between two ranks over
    // one connection, and then moves them at about half the link's rate: on
    // the 2-host harness at 1 Gbit/s, a 64 MiB all-reduce between one rank a
    // host crossed at 66 MB/s each way over one connection, 119 MB/s (95% of
    // the link) over two, whatever the algorithm (docs/COLLECTIVES.md). A
    // value the user gives (OMPI_MCA_btl_tcp_links, mpirun --mca) stands.
    setenv("OMPI_MCA_btl_tcp_links", "2", /*overwrite=*/0);
    check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread");
    we_initialized = true;
    std::atexit(finalize_at_exit);
  } else {
    MPI_Query_thread(&provided);
  }
  if (provided < MPI_THREAD_MULTIPLE)
    throw Error("the MPI library gives thread level " + std::to_string(provided) + ", the mpi backend needs MPI_THREAD_MULTIPLE",
                "use an MPI built with thread support (Debian's OpenMPI is), or call MPI_Init_thread with MPI_THREAD_MULTIPLE");
}

int world_rank() {
  ensure_initialized();
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int world_size() {
  ensure_initialized();
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

std::string error_string(int rc) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(rc);
  return std::string(text, static_cast<size_t>(len));
}

void check(int rc, const std::string& what) {
  if (rc != MPI_SUCCESS) throw Error(what + " failed: " + error_string(rc));
}

void mark_unclean() { unclean = true; }

WatchGuard::WatchGuard(const OpContext& ctx, std::string stuck) : slot_(-1) {
  if (ctx.deadline == Clock::time_point::max()) return;
  std::call_once(watchdog_started, [] { std::thread(watchdog_loop).detach(); });
  for (int i = 0; i < kSlots && slot_ < 0; ++i)
    if (!slots[i].taken.exchange(true, std::memory_order_acquire)) slot_ = i;
  if (slot_ < 0) throw Error(ctx.describe() + ": more than " + std::to_string(kSlots) + " blocking MPI calls in flight at once");
  slots[slot_].ctx = &ctx;
  slots[slot_].stuck = std::move(stuck);
  slots[slot_].deadline_ns.store(to_ns(ctx.deadline), std::memory_order_release);
}

WatchGuard::~WatchGuard() {
  if (slot_ < 0) return;
  int64_t d = slots[slot_].deadline_ns.load(std::memory_order_acquire);
  while (d == -1 || !slots[slot_].deadline_ns.compare_exchange_weak(d, 0)) {  // fired: the job is being aborted
    if (d == -1) std::this_thread::sleep_for(std::chrono::seconds(1));
    d = slots[slot_].deadline_ns.load(std::memory_order_acquire);
  }
  slots[slot_].taken.store(false, std::memory_order_release);
}

}  // namespace artel::comm::mpi
