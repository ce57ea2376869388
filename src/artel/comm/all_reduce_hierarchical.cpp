// all_reduce "hierarchical" (Horovod's hierarchical all-reduce, NCCL's
// intra-node/inter-node split): for a group over H hosts with s slices
// (transport.h's Hierarchy: s = g on hosts of g ranks each, else the smallest
// host's count), chunk by chunk of s blocks,
//   1. reduce inside each host (shared memory): local rank l < s holds its
//      host's sum of block l of the chunk — a reduce-scatter where the host
//      has s ranks, an all-reduce where it has more;
//   2. local rank l < s all-reduces block l with the ranks of local rank l on
//      the other hosts (s slices side by side, over the links);
//   3. gather inside the host: every local rank holds the whole chunk — an
//      all-gather where the host has s ranks, s broadcasts where it has more.
// A host's link carries the 2(H−1)/H · S that an all-reduce between H hosts
// must move, in s flows of S/s; the host-local steps move S through shared
// memory. Step 2 runs on a thread of its own, so chunk k crosses the links
// while chunk k+1 is reduced inside the host and chunk k−1 gathered (Note
// [Pipelined hierarchical all-reduce]). avg reduces by sum and divides each
// block once, after it has crossed.
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
  // A reduce-scatter's or all-gather's blocks are the ranks': only hosts of
  // equal counts lay them out as slices.
  if (c.kind != OpKind::all_reduce && !h->equal_hosts()) return false;
  Collective across = c;
  across.op = c.op == ReduceOp::avg ? ReduceOp::sum : c.op;
  return h->carries(across);
}

OpContext on_host(const OpContext& ctx, const Hierarchy& h) {
  OpContext c = ctx;
  c.group_ranks = &h.local_group_ranks();
  return c;
}

void all_reduce_hierarchical(Transport& t, const Collective& c, const OpContext& ctx) {
  Hierarchy& h = *t.hierarchy();
  Transport& local = h.local();
  const size_t s = static_cast<size_t>(h.slices()), l = static_cast<size_t>(local.rank());
  const bool sliced = local.size() == h.slices(), in_slice = l < s;  // this host has s ranks; this rank crosses
  const ReduceOp op = c.op == ReduceOp::avg ? ReduceOp::sum : c.op;
  const size_t eb = c.elem_bytes();
  local.enter(ctx.seq);
  const OpContext host_ctx = on_host(ctx, h);

  // Chunks of equal blocks, s · block elements each; the last is shorter,
  // and the tail of fewer than s elements goes whole through every slice.
  const size_t per_chunk = std::max<size_t>(1, kHierarchicalChunkBytes / (s * eb)) * s;
  const size_t body = c.count / s * s, chunks = (body + per_chunk - 1) / per_chunk;
  auto chunk_begin = [&](size_t k) { return std::min(body, k * per_chunk); };
  auto block = [&](size_t k) { return (chunk_begin(k + 1) - chunk_begin(k)) / s; };
  auto block_of = [&](size_t k, size_t j) { return c.out + (chunk_begin(k) + j * block(k)) * eb; };
  auto chunk_in = [&](size_t k) { return c.in + chunk_begin(k) * eb; };

  auto host_reduce = [&](size_t k) {  // 1. (from c.in: the chunk's blocks, into block l of c.out)
    if (sliced) run_collective(local, part_of(c, OpKind::reduce_scatter, chunk_in(k), block_of(k, l), block(k), op), host_ctx);
    else run_collective(local, part_of(c, OpKind::all_reduce, chunk_in(k), block_of(k, 0), s * block(k), op), host_ctx);
  };
  auto cross = [&](size_t k) {  // 2.
    if (!in_slice) return;
    h.across().run(part_of(c, OpKind::all_reduce, block_of(k, l), block_of(k, l), block(k), op), ctx);
    finish_reduce(block_of(k, l), block(k), c.dtype, c.op, t.size());
  };
  auto host_gather = [&](size_t k) {  // 3.
    if (sliced) {
      run_collective(local, part_of(c, OpKind::all_gather, block_of(k, l), block_of(k, 0), block(k), op), host_ctx);
      return;
    }
    for (size_t j = 0; j < s; ++j) {
      Collective from_j = part_of(c, OpKind::broadcast, block_of(k, j), block_of(k, j), block(k), op);
      from_j.root = static_cast<int>(j);
      run_collective(local, from_j, host_ctx);
    }
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

  if (body < c.count) {  // the tail: the host's sum on every local rank, across in every slice, then to the rest
    const size_t n = c.count - body;
    std::byte* tail = c.out + body * eb;
    run_collective(local, part_of(c, OpKind::all_reduce, c.in + body * eb, tail, n, op), host_ctx);
    if (in_slice) {
      h.across().run(part_of(c, OpKind::all_reduce, tail, tail, n, op), ctx);
      finish_reduce(tail, n, c.dtype, c.op, t.size());
    }
    if (!sliced) run_collective(local, part_of(c, OpKind::broadcast, tail, tail, n, op), host_ctx);  // root 0
  }
}

}  // namespace artel::comm
