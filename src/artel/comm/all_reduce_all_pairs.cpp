// all_reduce "all_pairs": every rank sends its whole buffer to every other and
// reduces all N buffers in rank order — latency-optimal over point-to-point
// messages for small buffers (one round, no dependency chain).
// Cost: N-1 exchanges in one round; each rank sends and receives (N-1)·S bytes.
#include <memory>
#include <vector>

#include "artel/comm/algorithms.h"
#include "artel/comm/reduce.h"

namespace artel::comm {

void all_reduce_all_pairs(Transport& t, const Collective& c, const OpContext& ctx) {
  const int n = t.size(), r = t.rank();
  const size_t bytes = c.block_bytes();
  const auto all = std::make_unique_for_overwrite<std::byte[]>(bytes * n);  // received into before read
  std::vector<const void*> srcs(n);
  for (int k = 1; k < n; ++k) {
    int dst = (r + k) % n, src = (r + n - k) % n;
    t.send_recv(dst, collective_tag(ctx.seq, 0), c.in, bytes, src, collective_tag(ctx.seq, 0), all.get() + src * bytes,
                bytes, ctx);
  }
  for (int j = 0; j < n; ++j) srcs[j] = j == r ? static_cast<const void*>(c.in) : all.get() + j * bytes;
  reduce_sources(c.out, srcs.data(), n, c.count, c.dtype, c.op);
  finish_reduce(c.out, c.count, c.dtype, c.op, n);
}

}  // namespace artel::comm
