// barrier "shared": one barrier on the shared segment (with the signature
// check). Cost: 1 step, no data.
// barrier "dissemination": in round k each rank signals rank r+2^k and waits
// for r-2^k, over point-to-point messages. Cost: ceil(log2 N) steps of 1 byte.
#include "artel/comm/shared_steps.h"

namespace artel::comm {

void barrier_shared(Transport& t, const Collective& c, const OpContext& ctx) {
  SharedMemory& sm = shared_of(t);
  post_signature(sm, c, ctx.seq);
  sm.sync(ctx);
  check_signatures(sm, t.size(), ctx);
}

void barrier_dissemination(Transport& t, const Collective& c, const OpContext& ctx) {
  const int n = t.size(), r = t.rank();
  char out = 1, in = 0;
  uint32_t step = 0;
  for (int dist = 1; dist < n; dist <<= 1, ++step)
    t.send_recv((r + dist) % n, collective_tag(ctx.seq, step), &out, 1, (r - dist + n) % n, collective_tag(ctx.seq, step),
                &in, 1, ctx);
}

}  // namespace artel::comm
