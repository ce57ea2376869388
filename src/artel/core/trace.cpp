#include "artel/core/trace.h"

#include <atomic>
#include <chrono>
#include <mutex>

namespace artel::trace {
namespace {

std::atomic<bool> g_enabled{false};
std::atomic<int64_t> g_step{-1};

struct Recorder {
  std::mutex mu;
  std::vector<Event> events;
};

// Never destroyed: a progress thread may still record while the process exits.
Recorder& recorder() {
  static Recorder* r = new Recorder;
  return *r;
}

}  // namespace

void enable(bool on) { g_enabled.store(on, std::memory_order_relaxed); }
bool enabled() { return g_enabled.load(std::memory_order_relaxed); }
void set_step(int64_t step) { g_step.store(step, std::memory_order_relaxed); }
int64_t current_step() { return g_step.load(std::memory_order_relaxed); }

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void record(Event e) {
  if (!enabled()) return;
  if (e.step == -1) e.step = current_step();
  Recorder& r = recorder();
  std::lock_guard lock(r.mu);
  r.events.push_back(std::move(e));
}

std::vector<Event> take() {
  Recorder& r = recorder();
  std::vector<Event> out;
  std::lock_guard lock(r.mu);
  out.swap(r.events);
  return out;
}

Scope::Scope(std::string_view name, std::string_view category, std::string_view track, int micro_batch) {
  if (!enabled()) return;
  active_ = true;
  event_.name = name;
  event_.category = category;
  event_.track = track;
  event_.step = current_step();
  event_.micro_batch = micro_batch;
  event_.start_ns = now_ns();
}

Scope::~Scope() {
  if (!active_) return;
  event_.dur_ns = now_ns() - event_.start_ns;
  try {
    record(std::move(event_));
  } catch (...) {
    // Out of memory while tracing: lose this event rather than terminate in a destructor.
  }
}

}  // namespace artel::trace
