// all_gather "shared": over registered buffers, every rank writes its block
// straight into every peer's `out` (push) when every rank's `out` is one and
// the blocks are small enough to stay in cache, or copies each peer's block
// out of its registered `in` (pull) when every `in` is (2 barriers either
// way); else through the scratch halves in chunks, pipelined (copy chunk k in
// while reading chunk k-1 out).
// Cost: registered: 2 steps, each rank writes (push) or reads (pull) (N-1)·S
// (S = one block) in peers' memory; staged: K+2 steps for K chunks, each rank
// also writes S.
//
// Why push: a block that peers read stays shared in their caches, and the next
// write to it — the owner's optimizer updating its weights in place, ZeRO's
// step — waits for every line to be taken back from them. Pushed, the owner's
// block never leaves its cache; the peers' copies move in one streaming copy
// instead. W1 on 2 workers at --zero 1 (AMD Zen 5): the sharded SGD of 335 K
// weights took 0.18-0.29 ms after pulled gathers and 0.07 ms after pushed
// ones, as unsharded on 1 worker; the step went 2.87 -> 2.65 ms. The same
// reason has all_reduce "two_shot" write its reduced share into every output.
#include "artel/comm/shared_steps.h"

namespace artel::comm {
namespace {

// Blocks up to this size are pushed. Larger ones leave the caches before
// anyone writes them again, and pulled they move faster: 2 ranks, 32 MiB
// blocks, 5.0-5.2 ms pulled against 5.6-6.1 pushed (AMD Zen 5); level at 4 MiB.
constexpr size_t kPushBytes = 4u << 20;

}  // namespace

void all_gather_shared(Transport& t, const Collective& c, const OpContext& ctx) {
  SharedMemory& sm = shared_of(t);
  const int n = t.size(), r = t.rank();
  const size_t bytes = c.block_bytes();
  Handshake h = handshake(t, c, ctx, bytes, bytes * n);
  if (h.outs_registered && bytes <= kPushBytes) {  // in place, `in` is already block r of this rank's `out`
    for (int j = 0; j < n; ++j)
      if (h.out[j] + r * bytes != c.in) copy_bytes(h.out[j] + r * bytes, c.in, bytes);
    sm.sync(ctx);  // every block is in every `out`, and no one writes ours any more
    return;
  }
  if (h.ins_registered) {
    for (int j = 0; j < n; ++j) copy_bytes(c.out + j * bytes, j == r ? c.in : h.in[j], bytes);
    sm.sync(ctx);
    return;
  }
  const Chunks chunks{bytes, sm.half_bytes()};
  for (size_t i = 0; i <= chunks.num(); ++i) {
    if (i >= 1)
      for (int j = 0; j < n; ++j) copy_bytes(c.out + j * bytes + chunks.begin(i - 1), sm.read_half(j), chunks.len(i - 1));
    if (i == chunks.num()) break;
    copy_bytes(sm.write_half(), c.in + chunks.begin(i), chunks.len(i));
    sm.sync(ctx);
  }
}

}  // namespace artel::comm
