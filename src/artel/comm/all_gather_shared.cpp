// all_gather "shared": every rank copies each peer's block straight out of
// shared memory — from registered buffers when every rank's `in` is one (2
// barriers), else through the scratch halves in chunks, pipelined (copy chunk
// k in while reading chunk k-1 out).
// Cost: registered: 2 steps, each rank reads (N-1)·S (S = one block);
// staged: K+2 steps for K chunks, each rank also writes S.
#include "artel/comm/shared_steps.h"

namespace artel::comm {

void all_gather_shared(Transport& t, const Collective& c, const OpContext& ctx) {
  SharedMemory& sm = shared_of(t);
  const int n = t.size(), r = t.rank();
  const size_t bytes = c.block_bytes();
  Handshake h = handshake(t, c, ctx, bytes, 0);
  if (h.all_registered) {
    for (int j = 0; j < n; ++j) copy_bytes(c.out + j * bytes, j == r ? c.in : h.in[j], bytes);
    sm.sync(ctx);
    return;
  }
  const Chunks chunks{bytes, sm.half_bytes()};
  for (size_t i = 0; i <= chunks.num(); ++i) {
    if (i >= 1)
      for (int j = 0; j < n; ++j) copy_bytes(c.out + j * bytes + chunks.begin(i - 1), sm.read_half(j), chunks.len(i - 1));
    if (i == chunks.num()) break;
    copy_bytes(sm.write_half(), c.in + chunks.begin(i), chunks.len(i));
    sm.sync(ctx);
  }
}

}  // namespace artel::comm
