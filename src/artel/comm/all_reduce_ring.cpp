// all_reduce "ring": reduce-scatter then all-gather around a ring, over
// point-to-point messages — the bandwidth-optimal algorithm for transports
// without shared memory (gloo's AllreduceRingChunked, MPI's large-message one).
// Cost: 2(N-1) steps; each rank sends and receives 2(N-1)/N·S bytes.
// bf16 partial sums are rounded at each step.
#include <memory>

#include "artel/comm/algorithms.h"
#include "artel/comm/reduce.h"

namespace artel::comm {

void all_reduce_ring(Transport& t, const Collective& c, const OpContext& ctx) {
  const int n = t.size(), r = t.rank();
  const size_t e = c.elem_bytes();
  if (c.out != c.in) copy_bytes(c.out, c.in, c.block_bytes());
  if (n == 1 || c.count == 0) return finish_reduce(c.out, c.count, c.dtype, c.op, n);
  const int right = (r + 1) % n, left = (r + n - 1) % n;
  auto part = [&](int p, size_t& begin, size_t& len) {
    p = (p % n + n) % n;
    begin = part_begin(c.count, n, p);
    len = part_begin(c.count, n, p + 1) - begin;
  };
  const auto tmp = std::make_unique_for_overwrite<std::byte[]>((c.count / n + 1) * e);  // received into before read
  uint32_t step = 0;
  for (int s = 0; s < n - 1; ++s, ++step) {  // reduce-scatter: r ends owning part r+1
    size_t sb, sl, rb, rl;
    part(r - s, sb, sl);
    part(r - s - 1, rb, rl);
    t.send_recv(right, collective_tag(ctx.seq, step), c.out + sb * e, sl * e, left, collective_tag(ctx.seq, step),
                tmp.get(), rl * e, ctx);
    reduce_into(c.out + rb * e, tmp.get(), rl, c.dtype, c.op);
  }
  size_t ob, ol;
  part(r + 1, ob, ol);
  finish_reduce(c.out + ob * e, ol, c.dtype, c.op, n);
  for (int s = 0; s < n - 1; ++s, ++step) {  // all-gather the owned parts
    size_t sb, sl, rb, rl;
    part(r + 1 - s, sb, sl);
    part(r - s, rb, rl);
    t.send_recv(right, collective_tag(ctx.seq, step), c.out + sb * e, sl * e, left, collective_tag(ctx.seq, step),
                c.out + rb * e, rl * e, ctx);
  }
}

}  // namespace artel::comm
