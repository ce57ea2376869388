#include "artel/parallel/group_buffers.h"

namespace artel::parallel {

Tensor registered_or_plain(comm::ProcessGroup& group, int64_t numel, int64_t* registered, int64_t zero_from) {
  Tensor t;
  try {
    t = group.alloc({numel});
    if (registered) *registered += numel * static_cast<int64_t>(sizeof(float));
  } catch (const Error&) {
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
