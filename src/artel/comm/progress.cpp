#include "artel/comm/progress.h"

#include <algorithm>

#include "artel/core/threads.h"
#include "artel/core/trace.h"

namespace artel::comm {
namespace {
// How often the thread looks for queued ops while they keep coming (see
// progress.h): often when it has a core to itself, rarely when its rank's
// computation needs every core, since each look then takes the core from it.
constexpr auto kPollWithSpareCore = std::chrono::microseconds(500);
constexpr auto kPollWithoutSpareCore = std::chrono::milliseconds(10);
constexpr auto kStayLight = std::chrono::milliseconds(5);  // at least two polls, then sleep until woken
// Without a spare core: an op this old runs on the thread whether or not its
// peers have come to it (see progress.h).
constexpr auto kLiveness = std::chrono::seconds(1);

}  // namespace

std::string rank_list(const std::vector<int>& ranks) {
  std::string s = "[";
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s + "]";
}

std::string OpContext::describe() const {
  std::string s = op;
  if (seq) s += " #" + std::to_string(seq);
  return s + " in group '" + group + "'";
}

std::string OpContext::rank_name(int r) const {
  const int g = group_rank(r);
  std::string s = "rank " + std::to_string(g);
  if (world_ranks) s.append(" (world rank ").append(std::to_string((*world_ranks)[static_cast<size_t>(g)])).append(")");
  return s;
}

TimeoutError OpContext::timeout_error(const std::vector<int>& missing, const std::string& detail) const {
  std::vector<int> named, world;
  for (int r : missing) {
    named.push_back(group_rank(r));
    if (world_ranks) world.push_back((*world_ranks)[static_cast<size_t>(named.back())]);
  }
  std::string who = missing.empty() ? "the backend cannot tell which ranks are missing"
                                    : "waiting for rank(s) " + rank_list(named) +
                                          (world_ranks ? " (world rank(s) " + rank_list(world) + ")" : "") +
                                          " which did not arrive";
  return TimeoutError(describe() + " timed out: " + who + (detail.empty() ? "" : " (" + detail + ")"),
                      "check that every rank issues the same collectives in the same order, or raise the timeout");
}

Error OpContext::abort_error() const { return Error(describe() + " aborted: the group is being destroyed"); }

Progress::Progress(std::shared_ptr<Transport> transport, std::string group, Duration timeout, std::vector<int> world_ranks)
    : transport_(std::move(transport)), group_(std::move(group)), trace_track_("comm " + group_), timeout_(timeout),
      world_ranks_(std::move(world_ranks)) {}

Progress::~Progress() { shutdown(); }

void Progress::start() { thread_ = std::thread([this] { thread_loop(); }); }

void Progress::shutdown() {
  {
    std::lock_guard lock(mu_);
    if (stop_) return;
    stop_ = true;
  }
  aborted_ = true;
  transport_->abort();
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::lock_guard exec(exec_);  // a helping caller finishes first
  std::lock_guard lock(mu_);
  for (auto& item : queue_) item.work->finish(std::make_exception_ptr(Error(item.work->description() + " cancelled: the group was destroyed")));
  queue_.clear();
}

WorkPtr Progress::submit(const std::string& op, uint64_t seq, OpFn fn, bool urgent) {
  auto work = std::make_shared<Work>(shared_from_this(), op, seq);
  bool wake;
  {
    std::lock_guard lock(mu_);
    if (stop_) throw Error(work->description() + ": the group was destroyed");
    queue_.push_back({work, std::move(fn), Clock::now(), urgent});
    wake = deep_sleep_ || urgent;
  }
  if (wake) cv_.notify_one();
  return work;
}

WorkPtr Progress::run_now_if(const std::string& op, const std::function<bool(const OpContext&)>& fn) {
  std::unique_lock exec(exec_, std::try_to_lock);
  if (!exec.owns_lock() || is_broken_.load(std::memory_order_acquire)) return nullptr;
  {
    std::lock_guard lock(mu_);
    if (stop_ || !queue_.empty()) return nullptr;  // keep issue order
  }
  OpContext ctx{op, 0, group_, Clock::now() + timeout_, &aborted_, nullptr, world_ranks()};
  const int64_t start = trace::enabled() ? trace::now_ns() : 0;
  if (!fn(ctx)) return nullptr;
  if (start) trace::record({op, "comm", trace_track_, start, trace::now_ns() - start, trace::current_step(), -1});
  auto work = std::make_shared<Work>(shared_from_this(), op, 0);
  work->finish(nullptr);
  return work;
}

void Progress::thread_loop() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    if (queue_.empty()) {
      if (Clock::now() - last_activity_ < std::max<Clock::duration>(kStayLight, 2 * poll_interval())) {
        cv_.wait_for(lock, poll_interval());
      } else {
        deep_sleep_ = true;
        cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        deep_sleep_ = false;
      }
      continue;
    }
    if (Clock::duration wait; !thread_takes_queue(wait)) {
      cv_.wait_for(lock, wait);
      continue;
    }
    lock.unlock();
    {
      // A caller helping in Work::wait holds exec_: leave the queue to it and
      // look again at the next poll, rather than queue up behind it.
      std::unique_lock exec(exec_, std::try_to_lock);
      if (exec.owns_lock()) run_queue(nullptr, Clock::time_point::max());
    }
    lock.lock();
    if (!queue_.empty()) cv_.wait_for(lock, poll_interval());
  }
}

bool Progress::spare_core() const {
  static const int cores = available_cores();
  return transport_->size() * num_threads() < cores;
}

Clock::duration Progress::poll_interval() const {
  return spare_core() ? Clock::duration(kPollWithSpareCore) : Clock::duration(kPollWithoutSpareCore);
}

bool Progress::thread_takes_queue(Clock::duration& wait) const {
  if (spare_core()) return true;
  if (std::any_of(queue_.begin(), queue_.end(), [](const Item& i) { return i.urgent; })) return true;
  const Item& front = queue_.front();
  const Clock::duration age = Clock::now() - front.queued;
  wait = age < poll_interval() ? poll_interval() - age : poll_interval();
  if (age >= kLiveness) return true;
  return age >= poll_interval() && peers_arrived(front.work->seq());
}

bool Progress::peers_arrived(uint64_t seq) const {
  if (seq == 0) return true;  // point-to-point: no collective sequence to look at
  const std::vector<int> missing = transport_->missing(seq);
  return std::all_of(missing.begin(), missing.end(), [&](int r) { return r == transport_->rank(); });
}

bool Progress::help(const Work& work, Clock::time_point deadline) {
  std::unique_lock exec(exec_, std::try_to_lock);
  if (!exec.owns_lock()) return false;
  run_queue(&work, deadline);
  return true;
}

void Progress::run_queue(const Work* until, Clock::time_point deadline) {
  for (;;) {
    Item item;
    {
      std::lock_guard lock(mu_);
      if (queue_.empty() || (until && until->completed())) return;
      item = std::move(queue_.front());
      queue_.pop_front();
      running_op_ = item.work->op();
      running_seq_ = item.work->seq();
    }
    run_one(item, deadline);
    std::lock_guard lock(mu_);
    last_activity_ = Clock::now();
    running_op_.clear();
    if (item.work.get() == until) return;
  }
}

void Progress::run_one(Item& item, Clock::time_point deadline) {
  OpContext ctx{item.work->op(), item.work->seq(), group_, std::min(deadline, Clock::now() + timeout_), &aborted_,
                nullptr, world_ranks()};
  std::string broken;
  if (is_broken_.load(std::memory_order_acquire)) {
    std::lock_guard lock(mu_);
    broken = broken_;
  }
  if (!broken.empty()) {
    // The cause first: it is what the user has to act on.
    item.work->finish(std::make_exception_ptr(
        Error(broken + "; so " + ctx.describe() + " was not run: the group is unusable after an earlier error",
              "create a new group (all ranks) after a failed collective")));
    return;
  }
  try {
    {
      // One timeline event per op run (copies no strings when tracing is
      // off), recorded before finish() so a waiter that then takes the
      // events sees it.
      trace::Scope traced(item.work->op(), "comm", trace_track_);
      item.fn(ctx);
    }
    item.work->finish(nullptr);
  } catch (const std::exception& e) {
    {
      std::lock_guard lock(mu_);
      if (broken_.empty()) broken_ = e.what();
      is_broken_.store(true, std::memory_order_release);
    }
    item.work->finish(std::current_exception());
  }
}

TimeoutError Progress::wait_timeout(const Work& work, Duration waited) const {
  std::string running, broken;
  uint64_t seq = 0;
  {
    std::lock_guard lock(const_cast<std::mutex&>(mu_));
    running = running_op_;
    seq = running_seq_;
    broken = broken_;
  }
  std::string msg = work.description() + " not done after " + std::to_string(waited.count()) + " ms";
  // An earlier op failed and this one is about to fail fast (run_one): that
  // failure is the cause, and our own rank has not entered this op.
  if (!broken.empty())
    return TimeoutError(msg + "; the group is unusable after an earlier error: " + broken,
                        "create a new group (all ranks) after a failed collective");
  // Name the ranks that have not reached the op the group is stuck on.
  uint64_t stuck = seq ? seq : work.seq();
  std::vector<int> missing = stuck ? transport_->missing(stuck) : std::vector<int>{};
  if (!running.empty() && seq != work.seq()) msg += "; the group is still running " + running + " #" + std::to_string(seq);
  msg += missing.empty() ? "" : "; rank(s) " + rank_list(missing) + " have not reached #" + std::to_string(stuck);
  return TimeoutError(msg, "check that every rank issues the same collectives in the same order, or wait longer");
}

Work::Work(std::shared_ptr<Progress> progress, std::string op, uint64_t seq)
    : progress_(std::move(progress)), op_(std::move(op)), seq_(seq) {}

std::string Work::description() const { return OpContext{op_, seq_, progress_->group()}.describe(); }

void Work::finish(std::exception_ptr error) {
  {
    std::lock_guard lock(mu_);
    error_ = std::move(error);
    done_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
}

bool Work::completed() const { return done_.load(std::memory_order_acquire); }

void Work::wait(Duration timeout) {
  ARTEL_CHECK(timeout.count() >= 0, description(), ": wait timeout must be >= 0 ms (0 = the group's default), got ",
              timeout.count());
  if (timeout.count() == 0) timeout = progress_->default_timeout();
  auto start = Clock::now();
  auto deadline = start + timeout;
  while (!completed()) {
    if (progress_->help(*this, deadline)) continue;
    // Someone else runs the ops: spin a little, then sleep until done.
    for (int i = 0; i < 2000 && !completed(); ++i) __builtin_ia32_pause();
    std::unique_lock lock(mu_);
    if (!cv_.wait_until(lock, std::min(deadline, Clock::now() + std::chrono::milliseconds(10)),
                        [&] { return completed(); }) &&
        Clock::now() >= deadline)
      throw progress_->wait_timeout(*this, std::chrono::duration_cast<Duration>(Clock::now() - start));
  }
  std::lock_guard lock(mu_);
  if (error_) std::rethrow_exception(error_);
}

}  // namespace artel::comm
