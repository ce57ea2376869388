// reduce_scatter "ring": partial sums of each block travel once around the
// ring, each rank adding its own contribution, over point-to-point messages.
// Cost: N-1 steps; each rank sends and receives (N-1)·S bytes (S = one block).
// bf16 partial sums are rounded at each step.
#include <memory>

#include "artel/comm/algorithms.h"
#include "artel/comm/reduce.h"

namespace artel::comm {

void reduce_scatter_ring(Transport& t, const Collective& c, const OpContext& ctx) {
  const int n = t.size(), r = t.rank();
  const size_t bytes = c.block_bytes();
  auto block = [&](int b) { return c.in + ((b % n + n) % n) * bytes; };
  // In place (`out` is block r of `in`): the last step adds block r itself,
  // so it receives into tmp and copies out after.
  const bool in_place = c.out == block(r);
  if (n == 1) {
    copy_bytes(c.out, c.in, bytes);  // nothing to copy in place
    return finish_reduce(c.out, c.count, c.dtype, c.op, n);
  }
  const int right = (r + 1) % n, left = (r + n - 1) % n;
  // Received into before read; two ranks need no partial sum to pass on.
  auto tmp = std::make_unique_for_overwrite<std::byte[]>(bytes);
  auto acc = n > 2 ? std::make_unique_for_overwrite<std::byte[]>(bytes) : nullptr;
  // Step s sends the partial sum of block r-s-1 and receives that of block r-s-2;
  // after N-1 steps the block received is r's own.
  for (int s = 0; s < n - 1; ++s) {
    const void* send = s == 0 ? static_cast<const void*>(block(r - 1)) : acc.get();
    bool last = s == n - 2;
    std::byte* dst = last && !in_place ? c.out : tmp.get();
    t.send_recv(right, collective_tag(ctx.seq, s), send, bytes, left, collective_tag(ctx.seq, s), dst, bytes, ctx);
    reduce_into(dst, block(r - s - 2), c.count, c.dtype, c.op);
    if (last && in_place) copy_bytes(c.out, dst, bytes);
    if (!last) std::swap(acc, tmp);
  }
  finish_reduce(c.out, c.count, c.dtype, c.op, n);
}

}  // namespace artel::comm
