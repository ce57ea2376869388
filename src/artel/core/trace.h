// Trace: a process-wide recorder of timed events (compute, communication,
// steps) for the training timeline (`artel train --trace FILE`).
//
// Off by default, and then nearly free: enabled() is one relaxed atomic load,
// record() returns at once and a Scope copies no strings. When on, events are
// appended under a mutex; that is cheap next to what they time (a layer's
// forward, a collective). Times are steady_clock (CLOCK_MONOTONIC)
// nanoseconds, so events from the processes of one machine share a time axis.
// Nothing is dropped while tracing: take() the events regularly (e.g. once per
// logged step) on a long run.
//
//   trace::enable(true);
//   trace::set_step(step);
//   { trace::Scope s("forward", "compute", "compute", micro_batch); stage.forward(x); }
//   std::vector<trace::Event> events = trace::take();
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace artel::trace {

struct Event {
  std::string name;      // "forward", "backward", "all_reduce", "send to rank 1 tag 3", ...
  std::string category;  // "compute" | "comm" | "step" | free text
  std::string track;     // timeline row inside the process: "compute", "comm world/[0,1]", ...
  int64_t start_ns = 0;  // steady_clock nanoseconds: comparable across processes of one machine
  int64_t dur_ns = 0;
  int64_t step = -1;     // training step, -1 = none
  int micro_batch = -1;  // -1 = none
};

void enable(bool on);  // off by default
bool enabled();        // one relaxed atomic load
// The current training step (process-wide), stamped on events recorded
// afterwards whose step is -1. -1 means none.
void set_step(int64_t step);
int64_t current_step();
// Thread-safe; ignored when tracing is off.
void record(Event e);
// Returns the events recorded so far, in recording order, and forgets them.
std::vector<Event> take();
int64_t now_ns();  // steady_clock, nanoseconds

// Records [construction, destruction) as one event when tracing is on at
// construction. The step is the one current at construction.
class Scope {
 public:
  Scope(std::string_view name, std::string_view category, std::string_view track, int micro_batch = -1);
  ~Scope();
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  bool active_ = false;
  Event event_;
};

}  // namespace artel::trace
