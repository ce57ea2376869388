#include "artel/parallel/ps_protocol.h"

#include <algorithm>
#include <cstring>
#include <sstream>

#include "artel/core/error.h"

namespace artel::parallel {

PsRoles PsRoles::of(int world_size, int servers) {
  ARTEL_CHECK(servers >= 1, "a parameter server job needs at least one server, got ", servers);
  if (world_size <= servers)
    throw Error("a parameter server job of " + std::to_string(world_size) + " ranks with " + std::to_string(servers) +
                    " servers has no rank left to work",
                "start more ranks than --ps-servers (artel train --nproc W --ps-servers S starts W + S)");
  return {world_size - servers, servers};
}

std::string PsRoles::describe() const {
  auto range = [](int first, int n) {
    return n == 1 ? "rank " + std::to_string(first) : "ranks " + std::to_string(first) + "-" + std::to_string(first + n - 1);
  };
  return std::to_string(workers) + (workers == 1 ? " worker (" : " workers (") + range(0, workers) + "), " +
         std::to_string(servers) + (servers == 1 ? " server (" : " servers (") + range(workers, servers) + ")";
}

std::vector<std::shared_ptr<comm::ProcessGroup>> ps_pair_groups(comm::ProcessGroup& world, const PsRoles& roles,
                                                                 comm::Duration patience) {
  // Worker w meets server s in group {w, W+s}. Workers go through servers in
  // order and servers through workers in order, so no two ranks wait on each
  // other in a cycle while the groups are made. Each pair's message buffer
  // holds a shard of a small model whole (W1's and W2's are 1.4-1.6 MB), so a
  // pull's reply or a push is one copy in and done: through the default
  // 128 KiB, it went in a dozen hand-offs, each waiting for the peer to be
  // scheduled, which on loaded or CPU-capped machines took ms apiece.
  // The pairs move only their callers' own tensors, so they register no
  // memory: with the default 64 MiB a rank, backed whole by the pair's
  // creator, each pair took 140 MiB of shared memory (worker 0 held 546 MiB
  // of it with 2 servers, every byte charged to its --memory-per-worker).
  constexpr size_t kMessageBytes = 2 << 20;
  std::vector<std::shared_ptr<comm::ProcessGroup>> groups;
  const int me = world.rank();
  if (roles.is_server(me)) {
    for (int w = 0; w < roles.workers; ++w)
      groups.push_back(world.new_group({w, me}, {.message_bytes = kMessageBytes, .registered_bytes = 0}));
  } else {
    for (int s = 0; s < roles.servers; ++s)
      groups.push_back(world.new_group(
          {me, roles.server_rank(s)}, {.message_bytes = kMessageBytes, .timeout = patience, .registered_bytes = 0}));
  }
  return groups;
}

std::string ps_table_text(const std::vector<PsParameter>& params) {
  std::string text;
  for (const PsParameter& p : params) {
    ARTEL_CHECK(p.name.find_first_of("\t\n") == std::string::npos, "parameter name '", p.name,
                "' holds a tab or a newline");
    text += p.name;
    for (size_t d = 0; d < p.shape.size(); ++d) {
      text += d ? ',' : '\t';
      text += std::to_string(p.shape[d]);
    }
    if (p.shape.empty()) text += '\t';
    if (p.sparse) text += "\tsparse";
    text += '\n';
  }
  return text;
}

std::vector<PsParameter> parse_ps_table(const std::string& text) {
  std::vector<PsParameter> params;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    const size_t tab = line.find('\t');
    ARTEL_CHECK(tab != std::string::npos && tab > 0, "parameter server: malformed table line '", line, "'");
    PsParameter p{line.substr(0, tab), {}};
    std::string rest = line.substr(tab + 1);
    if (const size_t flag = rest.find('\t'); flag != std::string::npos) {
      ARTEL_CHECK(rest.substr(flag + 1) == "sparse", "parameter server: malformed table line '", line, "'");
      p.sparse = true;
      rest.resize(flag);
    }
    std::istringstream dims(rest);
    for (std::string d; std::getline(dims, d, ',');) p.shape.push_back(std::stoll(d));
    params.push_back(std::move(p));
  }
  return params;
}

PsLayout::PsLayout(std::vector<PsParameter> ps, int servers) : params(std::move(ps)) {
  std::vector<std::pair<std::string, int64_t>> sizes;
  std::vector<int64_t> units;
  for (size_t i = 0; i < params.size(); ++i) {
    const PsParameter& p = params[i];
    ARTEL_CHECK(!p.sparse || !p.shape.empty(), "parameter server: sparse table ", p.name, " has no rows");
    sizes.emplace_back(p.name, shape_numel(p.shape));
    units.push_back(row_elements(i));
  }
  plan = plan_ps_shards(sizes, servers, 1'000'000, units);
  segments.resize(static_cast<size_t>(servers));
  elements.assign(static_cast<size_t>(servers), 0);
  for (size_t i = 0; i < plan.size(); ++i)
    for (const PsPart& part : plan[i].parts) {
      auto s = static_cast<size_t>(part.server);
      segments[s].push_back({i, part.begin, part.end, elements[s]});
      elements[s] += part.end - part.begin;
    }
}

int64_t PsLayout::row_elements(size_t param) const {
  const PsParameter& p = params.at(param);
  if (!p.sparse || p.shape.empty() || p.shape[0] == 0) return 1;
  return std::max<int64_t>(1, shape_numel(p.shape) / p.shape[0]);
}

bool PsLayout::has_sparse() const {
  for (const PsParameter& p : params)
    if (p.sparse) return true;
  return false;
}

void ps_send_header(comm::ProcessGroup& pair, int peer, PsMessage kind, int64_t a, int64_t b, int64_t c, int64_t d,
                    int64_t e) {
  Tensor h = Tensor::zeros({kHeaderWords}, DType::i64);
  int64_t* w = h.data<int64_t>();
  w[0] = static_cast<int64_t>(kind);
  w[1] = a, w[2] = b, w[3] = c, w[4] = d, w[5] = e;
  pair.send(h, peer)->wait();
}

std::vector<int64_t> ps_recv_header(comm::ProcessGroup& pair, int peer) {
  Tensor h = Tensor::zeros({kHeaderWords}, DType::i64);
  pair.recv(h, peer)->wait();
  const int64_t* w = h.data<int64_t>();
  return {w, w + kHeaderWords};
}

int64_t ps_word_count(int64_t bytes) { return (bytes + 7) / 8; }

void ps_send_text(comm::ProcessGroup& pair, int peer, const std::string& text) {
  if (!text.empty()) pair.send(ps_words(text), peer)->wait();
}

std::string ps_recv_text(comm::ProcessGroup& pair, int peer, int64_t bytes) {
  ARTEL_CHECK(bytes >= 0 && bytes < (1 << 20), "parameter server: a text of ", bytes, " bytes");
  if (bytes == 0) return "";
  Tensor words = Tensor::zeros({ps_word_count(bytes)}, DType::i64);
  pair.recv(words, peer)->wait();
  return ps_text(words, bytes);
}

void ps_send_words(comm::ProcessGroup& pair, int peer, PsMessage kind, const std::vector<int64_t>& words) {
  Tensor t = Tensor::zeros({std::max<int64_t>(1, static_cast<int64_t>(words.size()))}, DType::i64);
  std::copy(words.begin(), words.end(), t.data<int64_t>());
  ps_send_header(pair, peer, kind, static_cast<int64_t>(words.size()));
  if (!words.empty()) pair.send(t, peer)->wait();
}

std::vector<int64_t> ps_recv_words(comm::ProcessGroup& pair, int peer, PsMessage kind, const std::string& what) {
  const std::vector<int64_t> h = ps_recv_header(pair, peer);
  ARTEL_CHECK(h[0] == static_cast<int64_t>(kind), "expected ", what, ", got message kind ", h[0]);
  ARTEL_CHECK(h[1] >= 0 && h[1] < (1 << 20), "parameter server: a reply of ", h[1], " words");
  if (h[1] == 0) return {};
  Tensor t = Tensor::zeros({h[1]}, DType::i64);
  pair.recv(t, peer)->wait();
  return {t.data<int64_t>(), t.data<int64_t>() + h[1]};
}

Tensor ps_words(const std::string& text) {
  Tensor t = Tensor::zeros({std::max<int64_t>(1, ps_word_count(static_cast<int64_t>(text.size())))}, DType::i64);
  std::memcpy(t.data<int64_t>(), text.data(), text.size());
  return t;
}

std::string ps_text(const Tensor& words, int64_t bytes) {
  return std::string(reinterpret_cast<const char*>(words.data<int64_t>()), static_cast<size_t>(bytes));
}

std::vector<int64_t> encode_ps_stats(const std::vector<PsWorkerStats>& stats) {
  std::vector<int64_t> w{static_cast<int64_t>(stats.size())};
  for (const PsWorkerStats& s : stats) {
    w.insert(w.end(), {s.pushes, s.dropped ? 1 : 0, s.dropped_at, static_cast<int64_t>(s.staleness.counts().size())});
    for (const auto& [value, count] : s.staleness.counts()) w.insert(w.end(), {value, count});
  }
  return w;
}

std::vector<PsWorkerStats> decode_ps_stats(const std::vector<int64_t>& w) {
  size_t at = 0;
  auto next = [&] {
    ARTEL_CHECK(at < w.size(), "parameter server: truncated statistics");
    return w[at++];
  };
  std::vector<PsWorkerStats> stats(static_cast<size_t>(next()));
  for (PsWorkerStats& s : stats) {
    s.pushes = next();
    s.dropped = next() != 0;
    s.dropped_at = next();
    for (int64_t bins = next(); bins > 0; --bins) {
      const int64_t value = next(), count = next();
      s.staleness.record(value, count);
    }
  }
  return stats;
}

std::vector<int64_t> PsServerMemory::encode() const {
  return {parameters, gradients, optimizer_state, buffers, peak_resident};
}

PsServerMemory PsServerMemory::decode(const std::vector<int64_t>& w) {
  ARTEL_CHECK(w.size() == 5, "parameter server: a memory report of ", w.size(), " words, not 5");
  return {w[0], w[1], w[2], w[3], w[4]};
}

std::optional<int64_t> parse_staleness(const std::string& text) {
  if (text == "inf") return std::nullopt;
  size_t used = 0;
  long long s = -1;
  try {
    s = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || text.empty() || s < 0)
    throw Error("--staleness '" + text + "' is not a clock count", "use 0 (BSP), a positive count (SSP) or inf (ASP)");
  return s;
}

std::string describe_staleness(std::optional<int64_t> staleness) {
  if (!staleness) return "inf (ASP)";
  return std::to_string(*staleness) + (*staleness == 0 ? " (BSP)" : " (SSP)");
}

}  // namespace artel::parallel
