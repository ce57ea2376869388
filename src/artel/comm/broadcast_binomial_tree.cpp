// broadcast "binomial_tree": the root's buffer flows down a binomial tree over
// point-to-point messages (MPI's small-message broadcast).
// Cost: ceil(log2 N) steps; the root sends ceil(log2 N)·S bytes, every other rank receives S.
#include "artel/comm/algorithms.h"

namespace artel::comm {

void broadcast_binomial_tree(Transport& t, const Collective& c, const OpContext& ctx) {
  const int n = t.size();
  const int vr = (t.rank() - c.root + n) % n;
  const size_t bytes = c.block_bytes();
  if (vr == 0 && c.out != c.in) copy_bytes(c.out, c.in, bytes);
  int mask = 1;
  while (mask < n) {
    if (vr & mask) {
      t.recv((vr - mask + c.root) % n, collective_tag(ctx.seq, 0), c.out, bytes, ctx);
      break;
    }
    mask <<= 1;
  }
  for (mask >>= 1; mask > 0; mask >>= 1)
    if (vr + mask < n) t.send((vr + mask + c.root) % n, collective_tag(ctx.seq, 0), c.out, bytes, ctx);
}

}  // namespace artel::comm
