// reduce "binomial_tree": partial sums flow up a binomial tree to the root
// over point-to-point messages (MPI's small-message reduce).
// Cost: ceil(log2 N) steps; the root receives ceil(log2 N)·S bytes, a leaf sends S.
#include <memory>

#include "artel/comm/algorithms.h"
#include "artel/comm/reduce.h"

namespace artel::comm {

void reduce_binomial_tree(Transport& t, const Collective& c, const OpContext& ctx) {
  const int n = t.size();
  const int vr = (t.rank() - c.root + n) % n;  // rank relative to the root
  const size_t bytes = c.block_bytes();
  if (c.out != c.in) copy_bytes(c.out, c.in, bytes);
  const auto tmp = std::make_unique_for_overwrite<std::byte[]>(bytes);  // received into before read
  for (int mask = 1; mask < n; mask <<= 1) {
    if (vr & mask) {
      t.send((vr - mask + c.root) % n, collective_tag(ctx.seq, 0), c.out, bytes, ctx);
      return;
    }
    if (vr + mask < n) {
      t.recv((vr + mask + c.root) % n, collective_tag(ctx.seq, 0), tmp.get(), bytes, ctx);
      reduce_into(c.out, tmp.get(), c.count, c.dtype, c.op);
    }
  }
  finish_reduce(c.out, c.count, c.dtype, c.op, n);
}

}  // namespace artel::comm
