// all_reduce "one_shot": every rank copies its buffer into its scratch half,
// one barrier, then every rank reduces all N copies (in rank order, so all get
// the same bits) into its output — the latency-optimal algorithm: a single
// synchronisation. Buffers larger than a scratch half go in chunks, one
// barrier each.
// Cost: 1 step (per chunk); each rank writes S and reads N·S bytes.
#include <vector>

#include "artel/comm/reduce.h"
#include "artel/comm/shared_steps.h"

namespace artel::comm {

void all_reduce_one_shot(Transport& t, const Collective& c, const OpContext& ctx) {
  SharedMemory& sm = shared_of(t);
  const int n = t.size();
  const size_t e = c.elem_bytes();
  const Chunks chunks{c.count, sm.half_bytes() / e};
  const size_t k_end = std::max<size_t>(1, chunks.num());  // a zero-size op still checks signatures
  std::vector<const void*> srcs(n);
  for (size_t k = 0; k < k_end; ++k) {
    if (k == 0) post_signature(sm, c, ctx.seq);
    size_t begin = c.count ? chunks.begin(k) : 0, len = c.count ? chunks.len(k) : 0;
    copy_bytes(sm.write_half(), c.in + begin * e, len * e);
    sm.sync(ctx);
    if (k == 0) check_signatures(sm, n, ctx);
    for (int j = 0; j < n; ++j) srcs[j] = sm.read_half(j);
    reduce_sources(c.out + begin * e, srcs.data(), n, len, c.dtype, c.op);
    finish_reduce(c.out + begin * e, len, c.dtype, c.op, n);
  }
}

}  // namespace artel::comm
