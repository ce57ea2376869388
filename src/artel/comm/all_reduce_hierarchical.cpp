// all_reduce "hierarchical" (Horovod's hierarchical all-reduce, NCCL's
// intra-node/inter-node split): for a group over H hosts of g ranks each,
// chunk by chunk,
//   1. reduce-scatter inside each host (shared memory): local rank l holds
//      its host's sum of block l of the chunk;
//   2. local rank l all-reduces block l with the ranks of local rank l on the
//      other hosts (g slices side by side, over the links);
//   3. all-gather inside the host: every local rank holds the whole chunk.
// A host's link carries the 2(H−1)/H · S that an all-reduce between H hosts
// must move, in g flows of S/g; the host-local steps move S through shared
// memory. Step 2 runs on a thread of its own, so chunk k crosses the links
// while chunk k+1 is reduced inside the host and chunk k−1 gathered (Note
// [Pipelined hierarchical all-reduce]). avg reduces by sum and divides each
// block once, after it has crossed. Hosts of unequal rank counts have no
// equal slices, and the mpi backend gives them no Hierarchy: they run the
// flat algorithms.
#include "artel/comm/algorithms.h"
#include "artel/comm/reduce.h"
#include "artel/comm/step_thread.h"

namespace artel::comm {
namespace {

// Note [Pipelined hierarchical all-reduce]: run on the whole buffer at once, the
// three steps leave the links idle while a host reduces and gathers, and the cores
// idle while the links carry. At 1 Gbit/s on 2 hosts × 2 ranks (AMD Zen 3, a
// core a host, docs/COLLECTIVES.md), a 64 MiB all-reduce took 660-822 ms
// where the links allow 537 (65-81%); in chunks of kHierarchicalChunkBytes,
// the links' steps on their own thread, it takes 569-581 ms (92-94%). Chunks
// of 2 MiB measured the same as 4; 8 and 16 MiB less well (fewer to overlap).
// At 10 Gbit/s the two cores bound both ways alike, at half the link.

// `kind` over `count` elements at `in`/`out` with `op`, a copy of `c`'s dtype.
Collective part_of(const Collective& c, OpKind kind, const std::byte* in, std::byte* out, size_t count, ReduceOp op) {
  Collective p;
  p.kind = kind;
  p.in = in;
  p.out = out;
  p.count = count;
  p.dtype = c.dtype;
  p.op = op;
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
  const size_t g = static_cast<size_t>(local.size()), l = static_cast<size_t>(local.rank());
  const ReduceOp op = c.op == ReduceOp::avg ? ReduceOp::sum : c.op;
  const size_t eb = c.elem_bytes();
  local.enter(ctx.seq);

  // Chunks of equal blocks, g · block elements each; the last is shorter,
  // and the tail of fewer than g elements goes whole through every slice.
  const size_t per_chunk = std::max<size_t>(1, kHierarchicalChunkBytes / (g * eb)) * g;
  const size_t body = c.count / g * g, chunks = (body + per_chunk - 1) / per_chunk;
  auto chunk_begin = [&](size_t k) { return std::min(body, k * per_chunk); };
  auto block = [&](size_t k) { return (chunk_begin(k + 1) - chunk_begin(k)) / g; };
  auto mine = [&](size_t k) { return c.out + (chunk_begin(k) + l * block(k)) * eb; };

  auto host_reduce = [&](size_t k) {  // 1. (from c.in: the chunk's blocks, into block l of c.out)
    run_collective(local, part_of(c, OpKind::reduce_scatter, c.in + chunk_begin(k) * eb, mine(k), block(k), op), ctx);
  };
  auto cross = [&](size_t k) {  // 2.
    h.across().run(part_of(c, OpKind::all_reduce, mine(k), mine(k), block(k), op), ctx);
    finish_reduce(mine(k), block(k), c.dtype, c.op, t.size());
  };
  auto host_gather = [&](size_t k) {  // 3.
    run_collective(local, part_of(c, OpKind::all_gather, mine(k), c.out + chunk_begin(k) * eb, block(k), op), ctx);
  };

  if (chunks == 1) {
    host_reduce(0);
    cross(0);
    host_gather(0);
  } else if (chunks > 1) {
    StepThread across(cross);
    for (size_t k = 0; k < chunks; ++k) {
      host_reduce(k);
      across.post(k);
      if (k == 0) continue;
      across.wait(k - 1);
      host_gather(k - 1);
    }
    across.wait(chunks - 1);
    host_gather(chunks - 1);
  }

  if (body < c.count) {  // the tail: the host's sum on every local rank, then across in every slice
    const size_t n = c.count - body;
    std::byte* tail = c.out + body * eb;
    run_collective(local, part_of(c, OpKind::all_reduce, c.in + body * eb, tail, n, op), ctx);
    h.across().run(part_of(c, OpKind::all_reduce, tail, tail, n, op), ctx);
    finish_reduce(tail, n, c.dtype, c.op, t.size());
  }
}

}  // namespace artel::comm
