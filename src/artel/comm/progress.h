// Progress: a group's op queue and the thread that runs it.
//
// Ops run one at a time in issue order. The progress thread runs them in the
// background; a caller blocked in Work::wait runs them itself when the thread
// is not busy ("helping"), so a wait right after an issue costs no thread
// hand-off. Issue never blocks: it only queues. The thread polls lightly
// while ops keep coming, and sleeps until woken once idle for 5 ms (and two
// polls), so an issue usually costs no wake-up system call either — except an
// urgent one (a send), which wakes the thread at once.
//
// It polls every 500 µs when the host has a core to spare for it (ranks ×
// compute threads < cores), else every 10 ms: with every core computing, each
// poll takes the core from a rank's computation. At 500 µs that cost two
// data-parallel workers on two cores 4-8 % of their step (W1 and W2).
//
// Without a spare core the thread is a backstop only: it leaves an op to the
// caller who will wait on it, and runs it only when it is urgent, when it has
// sat in the queue a poll interval and every peer is already inside it (they
// wait on us; a transport that cannot tell counts as yes), or after a second
// whatever the peers do. Running it earlier puts a second thread on a core
// the computation needs, and when the caller comes to wait it hangs on the
// hand-off between the two: 4 % of a W1 step on two cores (2.64 ms against
// 2.53, medians of 10 paired runs). So an op its own rank waits on later in
// the step (DDP's) reaches the thread only if a peer already waits on it.
//
//   auto work = progress->submit("all_reduce", seq, [&](const OpContext& ctx) { ... });
//   work->wait();
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "artel/comm/process_group.h"
#include "artel/comm/transport.h"

namespace artel::comm {

// Ranks as they appear in error messages: "[0, 2, 3]".
std::string rank_list(const std::vector<int>& ranks);

class Progress : public std::enable_shared_from_this<Progress> {
 public:
  using OpFn = std::function<void(const OpContext&)>;

  // `world_ranks`: a subgroup's ranks in the first group's numbering (OpContext::world_ranks); {}: not a subgroup.
  Progress(std::shared_ptr<Transport> transport, std::string group, Duration timeout, std::vector<int> world_ranks = {});
  ~Progress();
  void start();  // after construction (needs shared_from_this)
  // Stops the thread; queued ops fail with "group destroyed". Aborts the transport.
  void shutdown();

  // `urgent`: wake the thread now even while it polls lightly — for an op
  // nobody waits on right away but whose peer does (a pipeline's send), so
  // it does not sit up to one poll interval in the queue.
  WorkPtr submit(const std::string& op, uint64_t seq, OpFn fn, bool urgent = false);

  // Runs `fn` on the calling thread if the group is idle (nothing queued or
  // running); `fn` returns false, having done nothing, when it cannot finish
  // without waiting. Returns the completed Work, or nullptr (then submit()).
  WorkPtr run_now_if(const std::string& op, const std::function<bool(const OpContext&)>& fn);

  // For Work::wait: runs queued ops on the calling thread, up to and including
  // `work`, if no one else is running them. Returns false if someone is.
  bool help(const Work& work, Clock::time_point deadline);
  // The TimeoutError for a wait on `work` that ran out of time.
  TimeoutError wait_timeout(const Work& work, Duration waited) const;
  Duration default_timeout() const { return timeout_; }
  const std::string& group() const { return group_; }
  const std::vector<int>* world_ranks() const { return world_ranks_.empty() ? nullptr : &world_ranks_; }

 private:
  struct Item {
    WorkPtr work;
    OpFn fn;
    Clock::time_point queued;
    bool urgent = false;
  };
  void thread_loop();
  // See the comment at the top.
  Clock::duration poll_interval() const;
  bool spare_core() const;
  // Every rank but this one has entered collective `seq` (true for 0, a
  // point-to-point op, and where the transport cannot tell).
  bool peers_arrived(uint64_t seq) const;
  // Whether the thread should run the queue now (needs mu_ and a non-empty
  // queue); else `wait` says how long to let it be.
  bool thread_takes_queue(Clock::duration& wait) const;
  // Pops and runs ops until the queue is empty or `until` has run; needs exec_.
  void run_queue(const Work* until, Clock::time_point deadline);
  void run_one(Item& item, Clock::time_point deadline);

  std::shared_ptr<Transport> transport_;
  std::string group_;
  std::string trace_track_;  // "comm <group>": the timeline row of this group's ops
  Duration timeout_;
  std::vector<int> world_ranks_;  // a subgroup's, in the first group's numbering
  std::atomic<bool> aborted_{false};
  std::mutex exec_;  // held by whoever runs ops
  std::mutex mu_;    // guards the fields below
  std::condition_variable cv_;
  std::deque<Item> queue_;
  bool stop_ = false;
  bool deep_sleep_ = false;
  Clock::time_point last_activity_{};
  std::string broken_;            // first error of an op; later ops fail fast
  std::atomic<bool> is_broken_{false};  // broken_ is set (read without mu_ on every op)
  std::string running_op_;        // for wait_timeout messages
  uint64_t running_seq_ = 0;
  std::thread thread_;
};

}  // namespace artel::comm
