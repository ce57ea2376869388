// reduce_scatter "hierarchical": for a group over H hosts of g ranks each
// (see all_reduce_hierarchical.cpp), with N = H·g blocks of `count`:
//   1. the N blocks are laid out by slice — local rank l's H blocks, those of
//      the ranks of local rank l on every host, side by side;
//   2. reduce-scatter inside the host (shared memory): local rank l holds
//      its host's sum of its slice's H blocks;
//   3. local rank l reduce-scatters those H blocks with its slice across the
//      hosts: each rank ends with the sum of its own block.
// A host's link carries (H−1)/H · S, what a reduce-scatter between H hosts
// must move, in g flows; the host-local step moves S through shared memory.
// avg reduces by sum and divides once at the end.
#include <memory>

#include "artel/comm/algorithms.h"
#include "artel/comm/reduce.h"

namespace artel::comm {

void reduce_scatter_hierarchical(Transport& t, const Collective& c, const OpContext& ctx) {
  Hierarchy& h = *t.hierarchy();
  Transport& local = h.local();
  const int g = local.size(), l = local.rank(), hosts = t.size() / g;
  const ReduceOp op = c.op == ReduceOp::avg ? ReduceOp::sum : c.op;
  const size_t block = c.block_bytes(), slice = static_cast<size_t>(hosts) * block;
  local.enter(ctx.seq);

  const auto by_slice = std::make_unique_for_overwrite<std::byte[]>(static_cast<size_t>(g) * slice);  // 1. (not zeroed: copied over whole)
  for (int sl = 0; sl < g; ++sl)
    for (int host = 0; host < hosts; ++host)
      stream_copy(by_slice.get() + static_cast<size_t>(sl) * slice + static_cast<size_t>(host) * block,
                  c.in + static_cast<size_t>(h.group_rank(sl, host)) * block, block);

  Collective in_host = c;  // 2. in place: local rank l's block of the host's buffer is its slice
  in_host.in = by_slice.get();
  in_host.out = by_slice.get() + static_cast<size_t>(l) * slice;
  in_host.count = c.count * static_cast<size_t>(hosts);
  in_host.op = op;
  in_host.algorithm = "auto";
  run_collective(local, in_host, ctx);

  Collective across = c;  // 3.
  across.in = by_slice.get() + static_cast<size_t>(l) * slice;
  across.out = c.out;
  across.op = op;
  h.across().run(across, ctx);
  finish_reduce(c.out, c.count, c.dtype, c.op, t.size());
}

}  // namespace artel::comm
