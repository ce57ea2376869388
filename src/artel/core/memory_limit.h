// The per-worker memory limit (`--memory-per-worker`): the launcher puts each
// worker in a memory cgroup with that limit and passes it on as
// ARTEL_MEMORY_LIMIT. A process over its cgroup's limit is SIGKILLed by the
// kernel without a word, so large tensor allocations check here first and
// throw the one-line out-of-memory artel::Error instead — naming what was
// being allocated and what helps — while the process can still say it.
//
//   check_memory_limit(nbytes);     // Storage's allocation: throws when it would go over
//   check_memory_limit_at_start();  // a worker's first act: refuses a limit it is already over
//
// What counts is what the kernel charges to the worker's cgroup and cannot
// reclaim (there is no swap under the limit): the process's anonymous
// resident memory (/proc/self/statm's resident minus shared, cheap to read;
// file pages such as the program's code are cache the kernel can drop), plus
// the shared-memory segments it created — charged to it when backed, though
// not resident until touched, and touched pages are "shared" in statm, so
// never counted twice. What this misses (small allocations, kernel memory,
// fragmentation) is why the launcher also diagnoses an OOM kill.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace artel {

// Set by the launcher (launch/attempt.cpp): the limit in bytes.
inline constexpr const char* kMemoryLimitVariable = "ARTEL_MEMORY_LIMIT";

// What helps a worker out of memory: the hint of the error here and of the
// launcher's line for a worker the kernel killed (launch/attempt.cpp).
inline constexpr const char* kOutOfMemoryHint =
    "hold less per worker: --zero 3 (weights, gradients and optimizer state sharded), --recompute full "
    "(activations), a smaller --batch-size, or more workers; or raise --memory-per-worker";

// The hint this process's out-of-memory errors give: kOutOfMemoryHint until
// a run sets its own, one that leaves out what the run already does
// (train::memory_hint_for). Ranks that are threads of one process set it
// each as its Trainer starts, so it is read and written under a lock.
void set_out_of_memory_hint(std::string hint);
std::string out_of_memory_hint();  // a copy: any thread may set it meanwhile

// Smaller allocations are not checked: reading /proc for each would cost more
// than they do, and they cannot take a process far over its limit.
inline constexpr size_t kMemoryCheckMinBytes = size_t{1} << 20;

// ARTEL_MEMORY_LIMIT, read once; 0 when unset. Throws artel::Error when it is
// not a positive number of bytes.
int64_t memory_limit_bytes();

// This process's memory as its cgroup charges it, less what can be reclaimed:
// anonymous resident memory (/proc/self/statm) plus backed shared memory.
int64_t resident_bytes();

// Shared memory this process created and backed (comm's /dev/shm segments):
// +bytes when created, -bytes when released. Thread-safe.
void note_backed_shared_memory(int64_t bytes);
int64_t backed_shared_memory_bytes();  // what the notes add up to now

// What of a limit is kept back for what the check cannot see: the kernel's
// own memory for the process (page tables, ...) and allocations under
// kMemoryCheckMinBytes since the last check. 1/32 of it, within [4, 64] MiB.
int64_t memory_headroom(int64_t limit);

// Whether allocating `nbytes` more with `resident` bytes resident would go
// over `limit` less its headroom (limit 0: no limit, never).
bool exceeds_memory_limit(int64_t resident, int64_t nbytes, int64_t limit);

// Memory freed but kept resident for reuse (tensor.cpp's large buffers) is
// given back by `release` when a check comes close to the limit, before it
// counts again. One per process; set by the keeper.
void set_kept_memory_release(void (*release)());

// Gives memory that is freed but still resident back to the kernel: the kept
// large buffers, then the heap's free pages (tcmalloc's or glibc's). For a
// phase change, when what the last phase freed will not be asked for again at
// those sizes.
void release_freed_memory();

// Throws the one-line out-of-memory artel::Error when an allocation of
// `nbytes` (>= kMemoryCheckMinBytes; smaller ones pass) would take this
// process over its limit; `what` names what is allocated (default: the
// thread's AllocationPurpose, core/memory_stats.h). Close to the limit it first gives freed memory back
// to the kernel (kept buffers, then the heap's free pages), so that what it counts is what is in use.
void check_memory_limit(size_t nbytes, const char* what = nullptr);

// Throws artel::Error when `limit` is too small for this process as it
// stands (its resident memory, program code included, over the limit less
// its headroom): a worker could not even start in it. A worker checks its own
// limit; `artel train --nproc` checks the limit it is about to give, as the
// workers run the same program.
void check_memory_limit_at_start(int64_t limit = memory_limit_bytes());

}  // namespace artel
