// Memory stats: how many bytes of tensor storage artel holds right now, and
// the most it held since the last reset — the activation and parameter memory
// of a training step, comparable between pipeline schedules (GPipe keeps all
// micro-batches' activations alive, 1F1B at most one per stage).
//
// Counts Storage::allocate only (requested bytes, before rounding up to the
// 64-byte alignment); memory a Storage merely wraps (a backend's registered
// shared memory) is not artel's allocation and is not counted. The counters
// are process-wide relaxed atomics: one fetch_add per allocation and free,
// plus a compare-and-swap only when a new peak is reached.
//
//   reset_peak_tensor_bytes();
//   run_step();
//   int64_t step_peak = peak_tensor_bytes();
#pragma once

#include <cstdint>

namespace artel {

int64_t live_tensor_bytes();     // bytes of tensor storage allocated by artel and not yet freed
int64_t peak_tensor_bytes();     // the largest live_tensor_bytes() since the last reset
void reset_peak_tensor_bytes();  // peak := live

// The process's peak resident memory as the OS counts it (VmHWM of
// /proc/self/status, shared memory it touched included); 0 where unknown.
int64_t peak_resident_bytes();

// Shared memory resident in the process now (RssShmem): its own registered
// communication buffers and the pages of its peers' that its collectives
// read in place. Counted in VmHWM by every process that touched them, yet
// held once on the host; mapped until the groups go, so at a run's end it is
// the run's most. 0 where unknown.
int64_t shared_resident_bytes();

// What this thread allocates tensors for while one is alive, for the
// out-of-memory error to say ("allocating 190.73 MiB for the optimizer
// state"). Scopes nest; the innermost names the allocation.
//
//   AllocationPurpose purpose("the optimizer state");
class AllocationPurpose {
 public:
  explicit AllocationPurpose(const char* what);  // a string that outlives the scope (a literal)
  ~AllocationPurpose();
  AllocationPurpose(const AllocationPurpose&) = delete;
  AllocationPurpose& operator=(const AllocationPurpose&) = delete;

 private:
  const char* previous_;
};
const char* allocation_purpose();  // "a tensor" outside every scope

namespace detail {
// For Storage (tensor.cpp) only.
void note_tensor_alloc(int64_t bytes);
void note_tensor_free(int64_t bytes);
}  // namespace detail

}  // namespace artel
