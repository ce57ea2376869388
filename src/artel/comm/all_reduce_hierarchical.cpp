// all_reduce "hierarchical" (Horovod's hierarchical all-reduce, NCCL's
// intra-node/inter-node split): for a group over H hosts of g ranks each,
//   1. all-reduce inside each host (shared memory): every local rank holds
//      its host's reduction;
//   2. local rank l all-reduces its 1/g of the buffer with the ranks of local
//      rank l on the other hosts (g slices side by side, over the links);
//   3. each local rank broadcasts its slice inside the host.
// A host's link carries the 2(H−1)/H · S that an all-reduce between H hosts
// must move, in g flows of S/g; the host-local steps move S through shared
// memory. avg reduces by sum and divides once at the end. Hosts of unequal
// rank counts have no equal slices, and the mpi backend gives them no
// Hierarchy: they run the flat algorithms.
#include "artel/comm/algorithms.h"
#include "artel/comm/reduce.h"

namespace artel::comm {
namespace {

// `c` over `count` elements of `data` (in place) with `op`.
Collective in_place(const Collective& c, OpKind kind, std::byte* data, size_t count, ReduceOp op, int root = 0) {
  Collective p;
  p.kind = kind;
  p.in = data;
  p.out = data;
  p.count = count;
  p.dtype = c.dtype;
  p.op = op;
  p.root = root;
  return p;
}

}  // namespace

bool hierarchical_fits(const Collective& c, Transport& t) {
  Hierarchy* h = t.hierarchy();
  const bool kind = c.kind == OpKind::all_reduce || c.kind == OpKind::reduce_scatter || c.kind == OpKind::all_gather;
  if (!h || !kind) return false;
  Collective across = c;
  across.op = c.op == ReduceOp::avg ? ReduceOp::sum : c.op;
  return h->carries(across);
}

void all_reduce_hierarchical(Transport& t, const Collective& c, const OpContext& ctx) {
  Hierarchy& h = *t.hierarchy();
  Transport& local = h.local();
  const int g = local.size(), l = local.rank();
  const ReduceOp op = c.op == ReduceOp::avg ? ReduceOp::sum : c.op;
  const size_t eb = c.elem_bytes();
  local.enter(ctx.seq);

  Collective host = c;  // 1. the host's reduction, into c.out
  host.op = op;
  host.algorithm = "auto";
  run_collective(local, host, ctx);

  const size_t b0 = part_begin(c.count, g, l), b1 = part_begin(c.count, g, l + 1);
  if (b1 > b0) h.across().run(in_place(c, OpKind::all_reduce, c.out + b0 * eb, b1 - b0, op), ctx);  // 2.
  for (int r = 0; r < g; ++r) {  // 3.
    const size_t r0 = part_begin(c.count, g, r), r1 = part_begin(c.count, g, r + 1);
    if (r1 > r0) run_collective(local, in_place(c, OpKind::broadcast, c.out + r0 * eb, r1 - r0, op, r), ctx);
  }
  finish_reduce(c.out, c.count, c.dtype, c.op, t.size());
}

}  // namespace artel::comm
