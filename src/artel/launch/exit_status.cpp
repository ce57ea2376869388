#include "artel/launch/exit_status.h"

#include <string.h>
#include <sys/wait.h>

#include "artel/launch/memory_size.h"

namespace artel::launch {

std::string signal_name(int sig) {
  // sigabbrev_np (glibc >= 2.32) gives "KILL" without the "SIG".
  const char* abbrev = sigabbrev_np(sig);
  if (abbrev == nullptr) return "signal " + std::to_string(sig);
  return std::string("SIG") + abbrev;
}

bool exited_cleanly(int wait_status) {
  return WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0;
}

std::string describe_exit(int wait_status) {
  if (WIFEXITED(wait_status)) return "exited with status " + std::to_string(WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status)) {
    int sig = WTERMSIG(wait_status);
    std::string what = "was killed by signal " + signal_name(sig) + " (" + std::to_string(sig) + ")";
    if (WCOREDUMP(wait_status)) what += ", core dumped";
    // The launcher describes only a worker that ended on its own, so a SIGKILL
    // came from outside — often the kernel, as a worker over its memory dies
    // without a word of its own.
    if (sig == SIGKILL) what += " (also how the kernel's OOM killer stops a process over the memory or a cgroup's memory.max)";
    return what;
  }
  return "ended with wait status " + std::to_string(wait_status);
}

std::string describe_out_of_memory(int wait_status, int64_t limit_bytes) {
  std::string limit = "its --memory-per-worker limit of " + format_memory_size(limit_bytes);
  if (WIFSIGNALED(wait_status) && WTERMSIG(wait_status) == SIGKILL)
    return "ran out of memory: the kernel killed it (SIGKILL) at " + limit;
  return describe_exit(wait_status) + " after the kernel killed a process of it for running out of memory at " + limit;
}

int exit_code_of(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return 1;
}

}  // namespace artel::launch
