#include "artel/core/memory_limit.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <utility>

#include "artel/core/error.h"
#include "artel/core/memory_stats.h"

namespace artel {
namespace {

double mib(int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

std::atomic<int64_t> g_backed_shared{0};
std::atomic<void (*)()> g_kept_release{nullptr};

int64_t read_limit() {
  const char* text = std::getenv(kMemoryLimitVariable);
  if (text == nullptr) return 0;
  int64_t value = 0;
  const char* end = text + std::char_traits<char>::length(text);
  auto [ptr, ec] = std::from_chars(text, end, value);
  if (ptr == text || ec != std::errc() || ptr != end || value <= 0)
    throw Error(detail::concat(kMemoryLimitVariable, "='", text, "' is not a positive number of bytes"),
                "the launcher sets it from --memory-per-worker; unset it to run without a limit");
  return value;
}

// /proc/self/statm in bytes: {resident, shared (file + shmem)}; zeros where unknown.
std::pair<int64_t, int64_t> read_statm() {
  // "size resident shared text lib data dt", in pages.
  int fd = ::open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {0, 0};
  char buf[128];
  ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return {0, 0};
  buf[n] = '\0';
  long long size = 0, resident = 0, shared = 0;
  if (std::sscanf(buf, "%lld %lld %lld", &size, &resident, &shared) != 3) return {0, 0};
  const int64_t page = ::sysconf(_SC_PAGESIZE);
  return {resident * page, shared * page};
}

// Free heap pages go back to the kernel from whichever allocator the program
// runs on: tcmalloc where it links it (the artel program: Note [The program's
// allocator] in tensor.cpp), else glibc's malloc.
void release_free_heap() {
  using Release = void (*)();
  static const auto tcmalloc = reinterpret_cast<Release>(::dlsym(RTLD_DEFAULT, "MallocExtension_ReleaseFreeMemory"));
  if (tcmalloc) tcmalloc();
  else ::malloc_trim(0);
}

}  // namespace

int64_t memory_limit_bytes() {
  static const int64_t limit = read_limit();
  return limit;
}

void note_backed_shared_memory(int64_t bytes) { g_backed_shared.fetch_add(bytes, std::memory_order_relaxed); }

int64_t backed_shared_memory_bytes() { return g_backed_shared.load(std::memory_order_relaxed); }

void set_kept_memory_release(void (*release)()) { g_kept_release.store(release); }

void release_freed_memory() {
  if (void (*release)() = g_kept_release.load()) release();
  release_free_heap();
}

int64_t resident_bytes() {
  auto [resident, shared] = read_statm();
  return resident - shared + g_backed_shared.load(std::memory_order_relaxed);
}

int64_t memory_headroom(int64_t limit) { return std::clamp<int64_t>(limit / 32, 8 << 20, 64 << 20); }

bool exceeds_memory_limit(int64_t resident, int64_t nbytes, int64_t limit) {
  return limit > 0 && resident + nbytes > limit - memory_headroom(limit);
}

void check_memory_limit(size_t nbytes, const char* what) {
  if (nbytes < kMemoryCheckMinBytes) return;
  const int64_t limit = memory_limit_bytes();
  if (limit == 0) return;
  const auto n = static_cast<int64_t>(nbytes);
  int64_t resident = resident_bytes();
  if (!exceeds_memory_limit(resident, n, limit)) return;
  // Memory freed earlier stays resident (kept large buffers, and the heap,
  // which is never trimmed: tensor.cpp) and may or may not serve this
  // allocation. Give the free pages back, so that what is left resident is
  // what is in use, and ask again. This costs page faults later, so it is
  // done only this close to the limit.
  release_freed_memory();
  resident = resident_bytes();
  if (!exceeds_memory_limit(resident, n, limit)) return;
  char shared[80] = "";
  if (int64_t backed = g_backed_shared.load(std::memory_order_relaxed); backed > 0)
    std::snprintf(shared, sizeof shared, " (%.2f MiB of it shared memory for communication)", mib(backed));
  char text[400];
  std::snprintf(text, sizeof text,
                "out of memory: allocating %.2f MiB for %s with %.2f MiB of tensors held, %.2f MiB resident%s of the "
                "%.0f MiB --memory-per-worker limit",
                mib(n), what ? what : allocation_purpose(), mib(live_tensor_bytes()), mib(resident), shared, mib(limit));
  throw Error(text, out_of_memory_hint());
}

void check_memory_limit_at_start(int64_t limit) {
  if (limit == 0) return;
  const int64_t resident = read_statm().first;  // the program's code counts here: it has to fit too
  if (!exceeds_memory_limit(resident, 0, limit)) return;
  char what[240];
  std::snprintf(what, sizeof what,
                "the %.2f MiB --memory-per-worker limit is too small for a worker, which holds %.2f MiB (its program "
                "and libraries) before it starts",
                mib(limit), mib(resident));
  throw Error(what, "give each worker more: --memory-per-worker 1G, say");
}

namespace {
// Set by every Trainer as it starts: ranks that are threads of one process
// (the thread backend) set it at once, and a string written by two threads
// was freed twice.
std::mutex g_hint_mutex;
std::string& hint_in_force() {
  static std::string hint = kOutOfMemoryHint;
  return hint;
}
}  // namespace

void set_out_of_memory_hint(std::string hint) {
  std::lock_guard lock(g_hint_mutex);
  hint_in_force() = std::move(hint);
}

std::string out_of_memory_hint() {
  std::lock_guard lock(g_hint_mutex);
  return hint_in_force();
}

}  // namespace artel
