// The steps of a pipeline's second stage, on a thread of their own: the
// hierarchical all-reduce (all_reduce_hierarchical.cpp) crosses the links
// with one chunk while the caller's thread works inside the host on others.
//
//   StepThread across([&](size_t k) { cross(k); });   // runs cross(0), cross(1), ... in order
//   prepare(0); across.post(0);                       // cross(0) may start
//   prepare(1); across.post(1); across.wait(0);       // cross(0) is done (or its error rethrown here)
#pragma once

#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace artel::comm {

// Runs step(0), step(1), ... on a thread of its own, step k once post(k) has
// been called; wait(k) returns when step k is done and rethrows its error. A
// failed step ends the thread. The destructor lets a running step finish
// (the links' steps end by themselves or by the mpi backend's watchdog) and
// runs no other.
class StepThread {
 public:
  explicit StepThread(std::function<void(size_t)> step);
  ~StepThread();
  StepThread(const StepThread&) = delete;
  StepThread& operator=(const StepThread&) = delete;

  void post(size_t k);  // step k may start (steps 0..k-1 were posted before)
  void wait(size_t k);  // until step k is done; rethrows the error of a failed step k or earlier

 private:
  void loop();

  std::function<void(size_t)> step_;
  std::mutex mutex_;
  std::condition_variable changed_;
  size_t posted_ = 0, done_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;  // last: started once the state above exists
};

}  // namespace artel::comm
