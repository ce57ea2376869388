#include "artel/parallel/group_buffers.h"

#include <cstdio>
#include <mutex>

namespace artel::parallel {

namespace {

// Said once a process: the run goes on, slower, and the reason is outside it.
void say_shared_memory_is_full(const comm::SharedMemoryFull& e) {
  static std::once_flag said;
  std::call_once(said, [&] {
    std::fprintf(stderr,
                 "artel: note: registered memory for communication falls back to ordinary memory, and its "
                 "collectives stage through scratch, slower: %s\n",
                 e.what());
  });
}

}  // namespace

Tensor registered_or_plain(comm::ProcessGroup& group, int64_t numel, int64_t* registered, int64_t zero_from) {
  Tensor t;
  try {
    t = group.alloc({numel});
    if (registered) *registered += numel * static_cast<int64_t>(sizeof(float));
  } catch (const comm::SharedMemoryFull& e) {
    say_shared_memory_is_full(e);
    t = Tensor::empty({numel});
  } catch (const Error&) {  // the registered memory is taken: by design for a model larger than it
    t = Tensor::empty({numel});
  }
  t.slice0(zero_from, numel).zero();
  return t;
}

double sum_over(comm::ProcessGroup& group, double value) {
  Tensor d = Tensor::empty({1}, DType::f64);
  d.data<double>()[0] = value;
  group.all_reduce(d)->wait();
  return d.data<double>()[0];
}

}  // namespace artel::parallel
