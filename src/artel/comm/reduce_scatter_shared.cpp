// reduce_scatter "shared": rank r reduces block r reading every peer's block r
// directly — in place from registered buffers when every rank's `in` is one (2
// barriers), else staged through the scratch halves in chunks (each chunk holds
// a slice of all N blocks), pipelined (copy chunk k in while reducing chunk k-1).
// `out` may be block r of `in` (in place): each piece of it is read before it
// is written, in both ways.
// Cost: registered: 2 steps, each rank reads N·S (S = one block) and writes S;
// staged: K+2 steps for K chunks, each rank also copies N·S in.
#include <vector>

#include "artel/comm/reduce.h"
#include "artel/comm/shared_steps.h"

namespace artel::comm {

void reduce_scatter_shared(Transport& t, const Collective& c, const OpContext& ctx) {
  SharedMemory& sm = shared_of(t);
  const int n = t.size(), r = t.rank();
  const size_t e = c.elem_bytes(), bytes = c.block_bytes();
  std::vector<const void*> srcs(n);
  Handshake h = handshake(t, c, ctx, bytes * n, 0);
  if (h.all_registered) {
    for (int j = 0; j < n; ++j) srcs[j] = (j == r ? c.in : h.in[j]) + r * bytes;
    // One pass: reduce and average together (in place too: a DDP bucket's block).
    std::byte* dst = c.out;
    reduce_to_many(&dst, 1, reinterpret_cast<const std::byte* const*>(srcs.data()), n, c.count, c.dtype, c.op, n,
                   false);
    sm.sync(ctx);
    return;
  }
  // Chunk k holds elements [begin, begin+len) of every block, block b at b·stride.
  const Chunks chunks{c.count, sm.half_bytes() / (e * n)};
  const size_t stride = chunks.per_chunk * e;
  for (size_t i = 0; i <= chunks.num(); ++i) {
    if (i >= 1) {
      size_t begin = chunks.begin(i - 1), len = chunks.len(i - 1);
      for (int j = 0; j < n; ++j) srcs[j] = sm.read_half(j) + r * stride;
      reduce_sources(c.out + begin * e, srcs.data(), n, len, c.dtype, c.op);
      finish_reduce(c.out + begin * e, len, c.dtype, c.op, n);
    }
    if (i == chunks.num()) break;
    for (int b = 0; b < n; ++b)
      copy_bytes(sm.write_half() + b * stride, c.in + b * bytes + chunks.begin(i) * e, chunks.len(i) * e);
    sm.sync(ctx);
  }
}

}  // namespace artel::comm
