#include "artel/comm/shared_steps.h"

namespace artel::comm {

void post_signature(SharedMemory& sm, const Collective& c, uint64_t seq) { signature_of(c, seq).store(sm.write_words()); }

void check_signatures(SharedMemory& sm, int n, const OpContext& ctx) {
  const Signature first = Signature::load(sm.read_words(0));
  bool same = true;
  for (int j = 1; j < n && same; ++j) same = Signature::load(sm.read_words(j)) == first;
  if (same) return;
  std::vector<Signature> all(n);
  for (int j = 0; j < n; ++j) all[j] = Signature::load(sm.read_words(j));
  throw_if_divergent(all, ctx);
}

Handshake handshake(Transport& t, const Collective& c, const OpContext& ctx, size_t in_bytes, size_t out_bytes) {
  SharedMemory& sm = shared_of(t);
  const int n = t.size();
  post_signature(sm, c, ctx.seq);
  uint64_t* words = sm.write_words();
  words[6] = in_bytes ? sm.handle_of(c.in, in_bytes) : 0;
  words[7] = out_bytes ? sm.handle_of(c.out, out_bytes) : 0;
  sm.sync(ctx);
  check_signatures(sm, n, ctx);
  Handshake h;
  h.ins_registered = h.outs_registered = true;
  for (int j = 0; j < n; ++j) {
    const uint64_t* w = sm.read_words(j);
    h.ins_registered = h.ins_registered && w[6] != SharedMemory::kNotRegistered;
    h.outs_registered = h.outs_registered && w[7] != SharedMemory::kNotRegistered;
  }
  h.all_registered = h.ins_registered && h.outs_registered;
  h.in.resize(n);
  h.out.resize(n);
  for (int j = 0; j < n; ++j) {
    const uint64_t* w = sm.read_words(j);
    h.in[j] = in_bytes && h.ins_registered ? sm.resolve(j, w[6]) : nullptr;
    h.out[j] = out_bytes && h.outs_registered ? sm.resolve(j, w[7]) : nullptr;
  }
  return h;
}

}  // namespace artel::comm
