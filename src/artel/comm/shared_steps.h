// Building blocks of the shared-memory algorithms (the *_shared.cpp and
// all_reduce_*_shot.cpp files): the opening handshake and chunking.
//
// Posted words of each half (SharedMemory::write_words): [0, 6) the op's
// Signature, [6] the registered handle of `in`, [7] that of `out`.
//
//   Handshake h = handshake(t, c, ctx, /*out_read_by_peers=*/true);   // one sync
//   if (h.all_registered) { ...read h.in[j], h.out[j] directly... }
#pragma once

#include <vector>

#include "artel/comm/algorithms.h"
#include "artel/comm/signature.h"

namespace artel::comm {

inline SharedMemory& shared_of(Transport& t) { return *t.shared(); }

// Posts this rank's signature into the current write half's words (and the
// registered handles of in/out). Call before the first sync of an op.
void post_signature(SharedMemory& sm, const Collective& c, uint64_t seq);
// After that sync: throws Error naming the diverging ranks if signatures differ.
void check_signatures(SharedMemory& sm, int n, const OpContext& ctx);

struct Handshake {
  bool all_registered = false;               // every rank's in and out (those asked for) are registered
  bool ins_registered = false;               // every rank's in (if asked) is registered
  bool outs_registered = false;              // every rank's out (if asked) is registered
  std::vector<std::byte*> in, out;           // every rank's registered buffers, by rank
};
// Posts the signature and handles, syncs once, checks the signatures and
// resolves the peers' registered buffers (those of a side that every rank
// registered). `in_bytes`/`out_bytes` of 0 mean that buffer need not be
// registered.
Handshake handshake(Transport& t, const Collective& c, const OpContext& ctx, size_t in_bytes, size_t out_bytes);

// Chunks of at most `per_chunk` elements covering [0, count): chunk k is
// [k·per_chunk, min(count, (k+1)·per_chunk)).
struct Chunks {
  size_t count, per_chunk;
  size_t num() const { return count == 0 ? 0 : (count + per_chunk - 1) / per_chunk; }
  size_t begin(size_t k) const { return k * per_chunk; }
  size_t len(size_t k) const { return std::min(count, (k + 1) * per_chunk) - k * per_chunk; }
};

}  // namespace artel::comm
