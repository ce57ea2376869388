#include "artel/core/memory_stats.h"

#include <atomic>
#include <fstream>
#include <string>

namespace artel {
namespace {
std::atomic<int64_t> g_live{0};
std::atomic<int64_t> g_peak{0};
thread_local const char* t_purpose = nullptr;

// A field of /proc/self/status in bytes ("VmHWM:  1234 kB"); 0 where absent.
int64_t status_bytes(const std::string& key) {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.compare(0, key.size(), key) == 0) return std::stoll(line.substr(key.size())) * 1024;
  return 0;
}
}  // namespace

AllocationPurpose::AllocationPurpose(const char* what) : previous_(t_purpose) { t_purpose = what; }
AllocationPurpose::~AllocationPurpose() { t_purpose = previous_; }
const char* allocation_purpose() { return t_purpose ? t_purpose : "a tensor"; }

int64_t live_tensor_bytes() { return g_live.load(std::memory_order_relaxed); }
int64_t peak_tensor_bytes() { return g_peak.load(std::memory_order_relaxed); }
void reset_peak_tensor_bytes() { g_peak.store(g_live.load(std::memory_order_relaxed), std::memory_order_relaxed); }

int64_t peak_resident_bytes() { return status_bytes("VmHWM:"); }
int64_t shared_resident_bytes() { return status_bytes("RssShmem:"); }

namespace detail {

void note_tensor_alloc(int64_t bytes) {
  const int64_t live = g_live.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  int64_t peak = g_peak.load(std::memory_order_relaxed);
  while (live > peak && !g_peak.compare_exchange_weak(peak, live, std::memory_order_relaxed)) {
  }
}

void note_tensor_free(int64_t bytes) { g_live.fetch_sub(bytes, std::memory_order_relaxed); }

}  // namespace detail
}  // namespace artel
