// broadcast "shared": the other ranks copy the root's buffer straight out of
// shared memory — from the root's registered buffer when it has one (2
// barriers), else through the root's scratch halves in chunks, pipelined (the
// root copies chunk k while the others read chunk k-1).
// Cost: registered: 2 steps, each non-root reads S; staged: K+1 steps for K
// chunks, the root also writes S.
#include "artel/comm/shared_steps.h"

namespace artel::comm {

void broadcast_shared(Transport& t, const Collective& c, const OpContext& ctx) {
  SharedMemory& sm = shared_of(t);
  const int n = t.size(), r = t.rank();
  const bool is_root = r == c.root;
  const size_t bytes = c.block_bytes();
  const Chunks chunks{bytes, sm.half_bytes()};
  post_signature(sm, c, ctx.seq);
  uint64_t handle = is_root ? sm.handle_of(c.out, bytes) : 0;
  sm.write_words()[6] = handle;
  if (is_root && handle == SharedMemory::kNotRegistered && chunks.num() > 0) copy_bytes(sm.write_half(), c.out, chunks.len(0));
  sm.sync(ctx);
  check_signatures(sm, n, ctx);
  uint64_t root_handle = sm.read_words(c.root)[6];
  if (root_handle != SharedMemory::kNotRegistered) {
    if (!is_root) copy_bytes(c.out, sm.resolve(c.root, root_handle), bytes);
    sm.sync(ctx);  // the root's buffer is free again
    return;
  }
  for (size_t i = 1; i <= chunks.num(); ++i) {
    if (!is_root) copy_bytes(c.out + chunks.begin(i - 1), sm.read_half(c.root), chunks.len(i - 1));
    if (i == chunks.num()) break;
    if (is_root) copy_bytes(sm.write_half(), c.out + chunks.begin(i), chunks.len(i));
    sm.sync(ctx);
  }
}

}  // namespace artel::comm
