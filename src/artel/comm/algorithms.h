// The collective algorithms, written once over Transport (transport.h), and
// the table that picks one per op by message size. Each algorithm lives in a
// file named for it, with its cost in the header comment; docs/COLLECTIVES.md
// has the whole table. N = ranks, S = bytes of the (per-rank) message.
//
//   Collective c{.kind = OpKind::all_reduce, .in = p, .out = p, .count = n, .dtype = DType::f32};
//   run_collective(transport, c, ctx);   // "auto" picks one_shot / two_shot / ring ...
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "artel/comm/process_group.h"
#include "artel/comm/transport.h"

namespace artel::comm {

enum class OpKind : uint8_t { all_reduce, broadcast, reduce, all_gather, reduce_scatter, all_to_all, gather, scatter, barrier };
const char* op_kind_name(OpKind kind);

// One collective call as the algorithms see it. `count` is elements per block:
// the whole tensor for all_reduce, broadcast and reduce; `in` for all_gather and
// gather; `out` for reduce_scatter and scatter; in/N for all_to_all.
struct Collective {
  OpKind kind = OpKind::all_reduce;
  const std::byte* in = nullptr;
  std::byte* out = nullptr;
  size_t count = 0;
  DType dtype = DType::f32;
  ReduceOp op = ReduceOp::sum;
  int root = 0;
  std::string algorithm = "auto";
  // Whether in/out are registered memory is the transport's call (handle_of).

  size_t elem_bytes() const { return dtype_size(dtype); }
  size_t block_bytes() const { return count * elem_bytes(); }
};

using AlgorithmFn = void (*)(Transport&, const Collective&, const OpContext&);
struct Algorithm {
  OpKind kind;
  const char* name;
  bool needs_shared;  // needs Transport::shared()
  AlgorithmFn run;
};
const std::vector<Algorithm>& algorithms();
// Throws Error naming the choices when no algorithm of `kind` is called
// `name` ("" and "auto" name the size-based choice): a flag checked before
// any collective runs.
void check_algorithm_name(OpKind kind, const std::string& name);
// The algorithm `c.algorithm` names, or the size-based choice for "auto";
// throws Error for an unknown name or one the transport cannot run.
const Algorithm& choose_algorithm(const Collective& c, Transport& t);
void run_collective(Transport& t, const Collective& c, const OpContext& ctx);

// The algorithms (one file each).
void all_reduce_one_shot(Transport&, const Collective&, const OpContext&);
void all_reduce_two_shot(Transport&, const Collective&, const OpContext&);
void all_reduce_ring(Transport&, const Collective&, const OpContext&);
void all_reduce_all_pairs(Transport&, const Collective&, const OpContext&);
void all_reduce_hierarchical(Transport&, const Collective&, const OpContext&);
void reduce_scatter_hierarchical(Transport&, const Collective&, const OpContext&);
void all_gather_hierarchical(Transport&, const Collective&, const OpContext&);
// Whether the hierarchical algorithm of `c`'s kind can run `c` on `t` (a
// group over several hosts, an op its links reduce).
bool hierarchical_fits(const Collective& c, Transport& t);
// `ctx` for a hierarchical algorithm's steps on the host (h.local()): their
// errors name the group's ranks, not the host's.
OpContext on_host(const OpContext& ctx, const Hierarchy& h);
void reduce_shared(Transport&, const Collective&, const OpContext&);
void reduce_binomial_tree(Transport&, const Collective&, const OpContext&);
void broadcast_shared(Transport&, const Collective&, const OpContext&);
void broadcast_binomial_tree(Transport&, const Collective&, const OpContext&);
void all_gather_shared(Transport&, const Collective&, const OpContext&);
void all_gather_ring(Transport&, const Collective&, const OpContext&);
void reduce_scatter_shared(Transport&, const Collective&, const OpContext&);
void reduce_scatter_ring(Transport&, const Collective&, const OpContext&);
void all_to_all_pairwise(Transport&, const Collective&, const OpContext&);
void gather_linear(Transport&, const Collective&, const OpContext&);
void scatter_linear(Transport&, const Collective&, const OpContext&);
void barrier_shared(Transport&, const Collective&, const OpContext&);
void barrier_dissemination(Transport&, const Collective&, const OpContext&);
// "native": the backend library's own (Transport::native(), e.g. MPI_Allreduce).
void run_native(Transport&, const Collective&, const OpContext&);

// memcpy that accepts null pointers when there is nothing to copy, and a block
// copied onto itself (an in-place all_gather's own block).
inline void copy_bytes(void* dst, const void* src, size_t n) {
  if (n && dst != src) std::memcpy(dst, src, n);
}

// The hierarchical reduce-scatter and all-gather reorder their blocks through
// scratch of at most this many bytes, a piece of every block at a time. Whole
// blocks at once took a bucket's size (GPT-2's 147 MiB) from the heap on every
// rank, which glibc kept resident: 2 hosts x 2 ranks peaked 180 MiB higher.
constexpr size_t kHierarchicalScratchBytes = size_t{16} << 20;

// Elements of each block per piece, when `blocks` blocks of `element` bytes
// share the scratch above: at least one.
inline size_t hierarchical_piece(size_t blocks, size_t element) {
  return std::max<size_t>(1, kHierarchicalScratchBytes / (blocks * element));
}

// The hierarchical all-reduce goes in chunks of about this many bytes, the
// host-local steps of one under the links' step of another (Note [Pipelined
// hierarchical all-reduce], all_reduce_hierarchical.cpp).
constexpr size_t kHierarchicalChunkBytes = size_t{4} << 20;

// Balanced split of n items into `parts`: part p is [part_begin(n, parts, p), part_begin(n, parts, p + 1)).
inline size_t part_begin(size_t n, int parts, int p) { return n * static_cast<size_t>(p) / static_cast<size_t>(parts); }

}  // namespace artel::comm
