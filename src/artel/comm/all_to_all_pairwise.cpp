// all_to_all "pairwise": in step k rank r sends its block for r+k and receives
// the block from r-k, over point-to-point messages.
// Cost: N-1 steps; each rank sends and receives (N-1)·S bytes (S = one block).
#include "artel/comm/algorithms.h"

namespace artel::comm {

void all_to_all_pairwise(Transport& t, const Collective& c, const OpContext& ctx) {
  const int n = t.size(), r = t.rank();
  const size_t bytes = c.block_bytes();
  copy_bytes(c.out + r * bytes, c.in + r * bytes, bytes);
  for (int k = 1; k < n; ++k) {
    int dst = (r + k) % n, src = (r + n - k) % n;
    t.send_recv(dst, collective_tag(ctx.seq, 0), c.in + dst * bytes, bytes, src, collective_tag(ctx.seq, 0),
                c.out + src * bytes, bytes, ctx);
  }
}

}  // namespace artel::comm
