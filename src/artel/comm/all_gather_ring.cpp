// all_gather "ring": each step passes the block received last step to the
// right neighbour, over point-to-point messages.
// Cost: N-1 steps; each rank sends and receives (N-1)·S bytes (S = one block),
// i.e. (N-1)/N of the gathered result.
#include "artel/comm/algorithms.h"

namespace artel::comm {

void all_gather_ring(Transport& t, const Collective& c, const OpContext& ctx) {
  const int n = t.size(), r = t.rank();
  const size_t bytes = c.block_bytes();
  copy_bytes(c.out + r * bytes, c.in, bytes);
  const int right = (r + 1) % n, left = (r + n - 1) % n;
  for (int s = 0; s < n - 1; ++s) {
    int sb = (r - s + n) % n, rb = (r - s - 1 + 2 * n) % n;
    t.send_recv(right, collective_tag(ctx.seq, s), c.out + sb * bytes, bytes, left, collective_tag(ctx.seq, s),
                c.out + rb * bytes, bytes, ctx);
  }
}

}  // namespace artel::comm
