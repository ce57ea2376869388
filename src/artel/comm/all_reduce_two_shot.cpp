// all_reduce "two_shot" (and reduce "shared"): each rank reduces its 1/N share
// reading its peers' buffers directly, then every rank gathers the reduced
// shares — reduce-scatter + all-gather with direct reads, the bandwidth-optimal
// algorithm over shared memory. reduce "shared" gathers at the root only.
//
// Registered buffers (ProcessGroup::alloc on every rank) are used in place,
// and each rank writes its reduced share straight into every rank's output:
// Cost: 2 barriers; each rank reads S (its share of all N inputs) and writes S
// (its share into N outputs), (N-1)/N·S of each in peers' memory; no copies.
// Other buffers are staged through the scratch halves in chunks, pipelined so
// that one barrier serves three things at once — the gather of chunk k-2, the
// reduction of chunk k-1 and the copy-in of chunk k:
// Cost: K+2 barriers for K chunks; each rank additionally copies S in.
#include <vector>

#include "artel/comm/reduce.h"
#include "artel/comm/shared_steps.h"

namespace artel::comm {
namespace {

// Buffers at least this large are written with streaming stores: they are far
// beyond what the cache can keep anyway.
constexpr size_t kStreamBytes = 32u << 20;

// Each rank reduces its share from every rank's `in` and writes it into every
// rank's `out` (or only the root's): reduce-scatter and all-gather fused.
void two_shot_registered(Transport& t, const Collective& c, const OpContext& ctx, const Handshake& h, int gather_to) {
  SharedMemory& sm = shared_of(t);
  const int n = t.size(), r = t.rank();
  const size_t e = c.elem_bytes();
  size_t b = part_begin(c.count, n, r), len = part_begin(c.count, n, r + 1) - b;
  std::vector<const std::byte*> srcs(n);
  std::vector<std::byte*> dsts;
  for (int j = 0; j < n; ++j) {
    srcs[j] = h.in[j] + b * e;
    if (gather_to < 0 || gather_to == j) dsts.push_back(h.out[j] + b * e);
  }
  reduce_to_many(dsts.data(), static_cast<int>(dsts.size()), srcs.data(), n, len, c.dtype, c.op, n,
                 c.block_bytes() >= kStreamBytes);
  sm.sync(ctx);  // every share is in place, and no one reads our buffers any more
}

// Half layout: A = the chunk's input [per_chunk elements], B = reduced shares.
void two_shot_staged(Transport& t, const Collective& c, const OpContext& ctx, int gather_to) {
  SharedMemory& sm = shared_of(t);
  const int n = t.size(), r = t.rank();
  const size_t e = c.elem_bytes();
  const Chunks chunks{c.count, sm.half_bytes() / (2 * e)};
  const size_t b_off = chunks.per_chunk * e, num = chunks.num();
  const bool gathers = gather_to < 0 || gather_to == r;
  std::vector<const void*> srcs(n);
  for (size_t i = 0; i <= num + 1; ++i) {
    if (i >= 2 && gathers) {  // gather chunk i-2
      size_t k = i - 2, base = chunks.begin(k), len = chunks.len(k);
      for (int j = 0; j < n; ++j) {
        size_t jb = part_begin(len, n, j), jl = part_begin(len, n, j + 1) - jb;
        copy_bytes(c.out + (base + jb) * e, sm.read_half(j) + b_off + jb * e, jl * e);
      }
    }
    if (i >= 1 && i <= num) {  // reduce my share of chunk i-1
      size_t len = chunks.len(i - 1);
      size_t b = part_begin(len, n, r), l = part_begin(len, n, r + 1) - b;
      for (int j = 0; j < n; ++j) srcs[j] = sm.read_half(j) + b * e;
      std::byte* dst = sm.write_half() + b_off + b * e;
      reduce_sources(dst, srcs.data(), n, l, c.dtype, c.op);
      finish_reduce(dst, l, c.dtype, c.op, n);
    }
    if (i < num) copy_bytes(sm.write_half(), c.in + chunks.begin(i) * e, chunks.len(i) * e);
    if (i <= num) sm.sync(ctx);
  }
}

void two_shot(Transport& t, const Collective& c, const OpContext& ctx, int gather_to) {
  Handshake h = handshake(t, c, ctx, c.block_bytes(), c.block_bytes());
  if (h.all_registered) return two_shot_registered(t, c, ctx, h, gather_to);
  two_shot_staged(t, c, ctx, gather_to);
}

}  // namespace

void all_reduce_two_shot(Transport& t, const Collective& c, const OpContext& ctx) { two_shot(t, c, ctx, -1); }

void reduce_shared(Transport& t, const Collective& c, const OpContext& ctx) { two_shot(t, c, ctx, c.root); }

}  // namespace artel::comm
