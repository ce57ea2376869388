#include "artel/comm/signature.h"

#include <map>

namespace artel::comm {

void Signature::store(uint64_t* w) const {
  w[0] = kind, w[1] = seq, w[2] = count, w[3] = dtype, w[4] = op, w[5] = root;
}

Signature Signature::load(const uint64_t* w) { return {w[0], w[1], w[2], w[3], w[4], w[5]}; }

std::string Signature::str() const {
  auto k = static_cast<OpKind>(kind);
  std::string s = std::string(op_kind_name(k)) + " #" + std::to_string(seq) + " of " + std::to_string(count) + " " +
                  dtype_name(static_cast<DType>(dtype));
  if (k == OpKind::all_reduce || k == OpKind::reduce || k == OpKind::reduce_scatter)
    s += std::string(" (") + reduce_op_name(static_cast<ReduceOp>(op)) + ")";
  if (k == OpKind::broadcast || k == OpKind::reduce || k == OpKind::gather || k == OpKind::scatter)
    s += " root " + std::to_string(root);
  return s;
}

Signature signature_of(const Collective& c, uint64_t seq) {
  return {static_cast<uint64_t>(c.kind), seq, c.count, static_cast<uint64_t>(c.dtype), static_cast<uint64_t>(c.op),
          static_cast<uint64_t>(c.root)};
}

std::string describe_divergence(const std::vector<Signature>& all, const OpContext& ctx) {
  bool same = true;
  for (const auto& s : all) same = same && s == all[0];
  if (same) return "";
  // The majority signature is "expected"; ties go to rank 0's.
  const Signature* expected = &all[0];
  int best = 0;
  for (const auto& s : all) {
    int votes = 0;
    for (const auto& o : all) votes += o == s;
    if (votes > best) best = votes, expected = &s;
  }
  std::string msg;
  for (size_t r = 0; r < all.size(); ++r)
    if (!(all[r] == *expected))
      msg += (msg.empty() ? "" : "; ") + ctx.rank_name(static_cast<int>(r)) + " issued " + all[r].str();
  return msg + " while the others issued " + expected->str();
}

void throw_if_divergent(const std::vector<Signature>& all, const OpContext& ctx) {
  std::string why = describe_divergence(all, ctx);
  if (!why.empty())
    throw Error(ctx.describe() + ": ranks disagree: " + why,
                "every rank must issue the same collectives, with the same sizes and dtypes, in the same order");
}

void check_agreement(Transport& t, const Signature& mine, const OpContext& ctx) {
  const int n = t.size(), r = t.rank();
  std::vector<uint64_t> words(static_cast<size_t>(n) * Signature::kWords);
  mine.store(&words[r * Signature::kWords]);
  constexpr uint32_t kCheckStep = 0xfffff;
  for (int k = 1; k < n; ++k) {
    int dst = (r + k) % n, src = (r + n - k) % n;
    t.send_recv(dst, collective_tag(ctx.seq, kCheckStep), &words[r * Signature::kWords], Signature::kWords * 8, src,
                collective_tag(ctx.seq, kCheckStep), &words[src * Signature::kWords], Signature::kWords * 8, ctx);
  }
  std::vector<Signature> all(n);
  for (int j = 0; j < n; ++j) all[j] = Signature::load(&words[j * Signature::kWords]);
  throw_if_divergent(all, ctx);
}

}  // namespace artel::comm
