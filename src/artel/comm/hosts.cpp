#include "artel/comm/hosts.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "artel/core/error.h"

namespace artel::comm {
namespace {

constexpr size_t kNameBytes = 256;  // HOST_NAME_MAX is 64; room to spare, a fixed block per rank

}  // namespace

std::string HostMap::describe() const {
  if (ranks.size() == 1) return "1 host";
  std::string counts;
  for (const auto& r : ranks) counts += (counts.empty() ? "" : ",") + std::to_string(r.size());
  return std::to_string(ranks.size()) + " hosts (" + counts + " ranks)";
}

HostMap host_map(const std::vector<std::string>& hostname_of_rank) {
  HostMap m;
  for (size_t r = 0; r < hostname_of_rank.size(); ++r) {
    const std::string& name = hostname_of_rank[r];
    ARTEL_CHECK(!name.empty(), "rank ", r, " has an empty hostname");
    auto it = std::find(m.names.begin(), m.names.end(), name);
    const int host = static_cast<int>(it - m.names.begin());
    if (it == m.names.end()) m.names.push_back(name), m.ranks.emplace_back();
    m.host_of.push_back(host);
    m.ranks[static_cast<size_t>(host)].push_back(static_cast<int>(r));
  }
  return m;
}

HostMap host_map(ProcessGroup& pg) {
  char name[kNameBytes] = {};
  ARTEL_CHECK(gethostname(name, kNameBytes - 1) == 0, "gethostname failed: ", std::strerror(errno));
  const int64_t words = kNameBytes / 4;  // moved as int32 words: any backend moves those
  Tensor mine = Tensor::zeros({words}, DType::i32), all = Tensor::zeros({words * pg.size()}, DType::i32);
  std::memcpy(mine.raw(), name, kNameBytes);
  pg.all_gather(mine, all)->wait();
  std::vector<std::string> names;
  for (int r = 0; r < pg.size(); ++r) {
    const char* p = static_cast<const char*>(all.raw()) + static_cast<size_t>(r) * kNameBytes;
    names.emplace_back(p, strnlen(p, kNameBytes));
  }
  return host_map(names);
}

}  // namespace artel::comm
