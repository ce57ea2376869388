// gather / scatter "linear": the root exchanges one message with every other
// rank, over point-to-point messages.
// Cost: N-1 steps at the root, which receives (gather) or sends (scatter)
// (N-1)·S bytes (S = one block); every other rank moves S once.
#include "artel/comm/algorithms.h"

namespace artel::comm {

void gather_linear(Transport& t, const Collective& c, const OpContext& ctx) {
  const size_t bytes = c.block_bytes();
  if (t.rank() != c.root) return t.send(c.root, collective_tag(ctx.seq, 0), c.in, bytes, ctx);
  copy_bytes(c.out + c.root * bytes, c.in, bytes);
  for (int j = 0; j < t.size(); ++j)
    if (j != c.root) t.recv(j, collective_tag(ctx.seq, 0), c.out + j * bytes, bytes, ctx);
}

void scatter_linear(Transport& t, const Collective& c, const OpContext& ctx) {
  const size_t bytes = c.block_bytes();
  if (t.rank() != c.root) return t.recv(c.root, collective_tag(ctx.seq, 0), c.out, bytes, ctx);
  for (int j = 0; j < t.size(); ++j)
    if (j != c.root) t.send(j, collective_tag(ctx.seq, 0), c.in + j * bytes, bytes, ctx);
  copy_bytes(c.out, c.in + c.root * bytes, bytes);
}

}  // namespace artel::comm
