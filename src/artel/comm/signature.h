// Signature: what a rank believes the current collective is (op, sequence
// number, count, dtype, reduce op, root). Ranks compare signatures to catch a
// rank that diverged: always inside the shared-memory algorithms (it costs a
// few cache lines), and before every collective with GroupOptions::debug_checks.
//
//   Signature mine = signature_of(c, ctx.seq);
//   std::string why = describe_divergence(all);   // "" when all agree
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "artel/comm/algorithms.h"

namespace artel::comm {

struct Signature {
  static constexpr int kWords = 6;
  uint64_t kind = 0, seq = 0, count = 0, dtype = 0, op = 0, root = 0;

  void store(uint64_t* words) const;
  static Signature load(const uint64_t* words);
  bool operator==(const Signature&) const = default;
  std::string str() const;  // "all_reduce #3 of 10 float32 (sum)"
};

Signature signature_of(const Collective& c, uint64_t seq);
// "" when every rank has the same signature; otherwise names the ranks that
// differ from the majority (ties: from rank 0) and what each issued, as
// `ctx` numbers them (OpContext::group_rank).
std::string describe_divergence(const std::vector<Signature>& all, const OpContext& ctx = {});
// Throws Error (naming the diverging ranks) if they differ.
void throw_if_divergent(const std::vector<Signature>& all, const OpContext& ctx);
// Debug mode: exchanges signatures over point-to-point messages and checks them.
void check_agreement(Transport& t, const Signature& mine, const OpContext& ctx);

}  // namespace artel::comm
