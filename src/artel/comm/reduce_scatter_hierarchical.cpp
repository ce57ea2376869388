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
// avg reduces by sum and divides once at the end. Blocks go a piece at a
// time, so the reordering's scratch stays small (kHierarchicalScratchBytes).
#include <memory>

#include "artel/comm/algorithms.h"
#include "artel/comm/reduce.h"

namespace artel::comm {

void reduce_scatter_hierarchical(Transport& t, const Collective& c, const OpContext& ctx) {
  Hierarchy& h = *t.hierarchy();
  Transport& local = h.local();
  const int g = local.size(), l = local.rank(), hosts = t.size() / g;
  const ReduceOp op = c.op == ReduceOp::avg ? ReduceOp::sum : c.op;
  const size_t e = c.elem_bytes(), block = c.block_bytes();
  const size_t piece = hierarchical_piece(static_cast<size_t>(g * hosts), e);  // elements of each block at a time
  local.enter(ctx.seq);
  const OpContext host_ctx = on_host(ctx, h);

  // Not zeroed: every piece is copied over whole before it is read.
  const auto by_slice = std::make_unique_for_overwrite<std::byte[]>(static_cast<size_t>(g * hosts) * std::min(piece, c.count) * e);
  for (size_t first = 0; first < c.count; first += piece) {
    const size_t n = std::min(piece, c.count - first), part = n * e, slice = static_cast<size_t>(hosts) * part;
    for (int sl = 0; sl < g; ++sl)  // 1.
      for (int host = 0; host < hosts; ++host)
        stream_copy(by_slice.get() + static_cast<size_t>(sl) * slice + static_cast<size_t>(host) * part,
                    c.in + static_cast<size_t>(h.group_rank(sl, host)) * block + first * e, part);

    Collective in_host = c;  // 2. in place: local rank l's block of the host's buffer is its slice
    in_host.in = by_slice.get();
    in_host.out = by_slice.get() + static_cast<size_t>(l) * slice;
    in_host.count = n * static_cast<size_t>(hosts);
    in_host.op = op;
    in_host.algorithm = "auto";
    run_collective(local, in_host, host_ctx);

    Collective across = c;  // 3.
    across.in = by_slice.get() + static_cast<size_t>(l) * slice;
    across.out = c.out + first * e;
    across.count = n;
    across.op = op;
    h.across().run(across, ctx);
  }
  finish_reduce(c.out, c.count, c.dtype, c.op, t.size());
}

}  // namespace artel::comm
