// all_gather "hierarchical": for a group over H hosts of g ranks each (see
// all_reduce_hierarchical.cpp), with N = H·g blocks of `count`:
//   1. local rank l all-gathers its block with its slice across the hosts
//      (the ranks of local rank l on every host): it holds its slice's H blocks;
//   2. all-gather inside the host (shared memory): every rank holds every
//      slice's H blocks;
//   3. the blocks are put in group-rank order.
// A host's link carries (H−1)/H · S, what an all-gather between H hosts must
// move, in g flows; the host-local step moves S through shared memory.
// Blocks go a piece at a time, so the reordering's scratch stays small
// (kHierarchicalScratchBytes).
#include <memory>

#include "artel/comm/algorithms.h"
#include "artel/comm/reduce.h"

namespace artel::comm {

void all_gather_hierarchical(Transport& t, const Collective& c, const OpContext& ctx) {
  Hierarchy& h = *t.hierarchy();
  Transport& local = h.local();
  const int g = local.size(), l = local.rank(), hosts = t.size() / g;
  const size_t e = c.elem_bytes(), block = c.block_bytes();
  const size_t piece = hierarchical_piece(static_cast<size_t>(g * hosts), e);  // elements of each block at a time
  local.enter(ctx.seq);
  const OpContext host_ctx = on_host(ctx, h);

  // Not zeroed: every piece is written whole before it is read.
  const auto by_slice = std::make_unique_for_overwrite<std::byte[]>(static_cast<size_t>(g * hosts) * std::min(piece, c.count) * e);
  for (size_t first = 0; first < c.count; first += piece) {
    const size_t n = std::min(piece, c.count - first), part = n * e, slice = static_cast<size_t>(hosts) * part;
    Collective across = c;  // 1.
    across.in = c.in + first * e;
    across.out = by_slice.get() + static_cast<size_t>(l) * slice;
    across.count = n;
    h.across().run(across, ctx);

    Collective in_host = c;  // 2. in place: local rank l's slice is its block of the host's buffer
    in_host.in = by_slice.get() + static_cast<size_t>(l) * slice;
    in_host.out = by_slice.get();
    in_host.count = n * static_cast<size_t>(hosts);
    in_host.algorithm = "auto";
    run_collective(local, in_host, host_ctx);

    for (int sl = 0; sl < g; ++sl)  // 3.
      for (int host = 0; host < hosts; ++host)
        stream_copy(c.out + static_cast<size_t>(h.group_rank(sl, host)) * block + first * e,
                    by_slice.get() + static_cast<size_t>(sl) * slice + static_cast<size_t>(host) * part, part);
  }
}

}  // namespace artel::comm
