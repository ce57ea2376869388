#include "artel/data/mapped_file_guard.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>

namespace artel::data {

namespace {

// Fixed storage the handler reads without allocating or locking: a slot is
// published by its `end` (release) and withdrawn by clearing it.
constexpr int kSlots = 16;
struct Slot {
  std::atomic<uintptr_t> begin{0}, end{0};
  char line[512] = {};  // the whole message, written once
  size_t length = 0;
};
Slot slots[kSlots];
std::mutex claim;  // taking and giving back slots (never in the handler)

void on_bus_error(int sig, siginfo_t* info, void*) {
  const auto at = reinterpret_cast<uintptr_t>(info->si_addr);
  for (Slot& s : slots) {
    const uintptr_t end = s.end.load(std::memory_order_acquire);
    if (end != 0 && at >= s.begin.load(std::memory_order_relaxed) && at < end) {
      ssize_t ignored = ::write(STDERR_FILENO, s.line, s.length);
      (void)ignored;
      ::_exit(1);
    }
  }
  ::signal(sig, SIG_DFL);  // not a mapped file's: the default action, when the access runs again
}

void install_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa {};
    sa.sa_sigaction = on_bus_error;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGBUS, &sa, nullptr);
  });
}

}  // namespace

MappedFileGuard::MappedFileGuard(const void* data, size_t bytes, const std::string& what) {
  if (!data || bytes == 0) return;
  install_once();
  std::lock_guard lock(claim);
  for (int i = 0; i < kSlots; ++i) {
    Slot& s = slots[i];
    if (s.end.load(std::memory_order_relaxed) != 0) continue;
    const std::string line = "artel: error: " + what + " shrank while the run read it (it is read through a memory "
                             "map, so the part cut off cannot be read) (hint: let a run finish before rewriting its "
                             "data files)\n";
    s.length = std::min(line.size(), sizeof s.line);
    std::memcpy(s.line, line.data(), s.length);
    s.begin.store(reinterpret_cast<uintptr_t>(data), std::memory_order_relaxed);
    s.end.store(reinterpret_cast<uintptr_t>(data) + bytes, std::memory_order_release);
    slot_ = i;
    return;
  }
}

MappedFileGuard::~MappedFileGuard() {
  if (slot_ < 0) return;
  std::lock_guard lock(claim);
  slots[slot_].end.store(0, std::memory_order_release);
}

}  // namespace artel::data
