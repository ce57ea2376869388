// gather_strings: every rank of a group sends a string of its own length —
// a configuration, a trace — to one root or to every rank. Each rank says
// its length first, so a string too long is refused on every rank, naming
// its rank, before any is sent.
//
//   auto all = all_gather_strings(group, cfg.dump(), {.max_bytes = 1 << 20});  // every rank's, in rank order
//   auto at0 = gather_strings(group, text, 0, {.max_bytes = 1 << 30});        // rank 0: every rank's; others: {}
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "artel/comm/process_group.h"

namespace artel::comm {

// What a string may be: its most bytes, and for the error that refuses a
// longer one, what it is ("trace") and the hint.
struct StringLimit {
  int64_t max_bytes = 0;
  std::string what = "string";
  std::string hint = "every rank must run the same artel build";
};

// Collectives over `group` (every rank calls them). A rank's string over the
// limit is refused on every rank with an Error naming the rank.
std::vector<std::string> all_gather_strings(ProcessGroup& group, const std::string& mine, const StringLimit& limit);
std::vector<std::string> gather_strings(ProcessGroup& group, const std::string& mine, int root, const StringLimit& limit);

}  // namespace artel::comm
