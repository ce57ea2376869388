// The artel program runs on tcmalloc (Note [The program's allocator],
// core/tensor.cpp). Its free pages stay with it, as glibc's heap keeps its
// top (M_TRIM_THRESHOLD -1): a step frees and allocates the same activations
// again, and a page given back after one step is faulted in and zeroed again
// in the next. With tcmalloc's default rate of giving them back, GPT-2 bf16
// on one thread took 3.6% longer a step than on glibc's malloc (3 rounds);
// with none, 1.4% (5 rounds; AMD Zen 5), at the same peak memory: what keeps
// the peak down is how tcmalloc reuses spans. What the steps freed goes back
// to the kernel when they are over and near --memory-per-worker
// (release_freed_memory).
#include <gperftools/malloc_extension.h>

namespace {

[[maybe_unused]] const bool kFreePagesKept = [] {
  MallocExtension::instance()->SetMemoryReleaseRate(0);
  return true;
}();

}  // namespace
