// How a worker ended, in words and as an exit code. The launcher names the
// failing worker in one line and passes its code on, the shell convention:
//
//   describe_exit(status)  // "exited with status 3" or
//                          // "was killed by signal SIGKILL (9)"
//   exit_code_of(status)   // 3, or 128 + 9 = 137 for the SIGKILL
//
// `status` is a wait status as waitpid() returns it.
#pragma once

#include <cstdint>
#include <string>

namespace artel::launch {

// "SIGKILL"; "signal 77" for a number the C library has no name for.
std::string signal_name(int sig);

// True when the process exited with status 0.
bool exited_cleanly(int wait_status);

// "exited with status 3" / "was killed by signal SIGTERM (15)".
std::string describe_exit(int wait_status);

// describe_exit for a worker whose memory cgroup recorded an OOM kill:
// "ran out of memory: the kernel killed it (SIGKILL) at its --memory-per-worker
// limit of 200 MiB", or, when what the kernel killed was a process the worker
// started, "exited with status 1 after the kernel killed a process of it ...".
std::string describe_out_of_memory(int wait_status, int64_t limit_bytes);

// The exit status for an exit, 128 + signal for a death by signal.
int exit_code_of(int wait_status);

}  // namespace artel::launch
