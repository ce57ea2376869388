#include "artel/plan/collective_cost.h"

#include <algorithm>
#include <cmath>

#include "artel/comm/algorithms.h"
#include "artel/core/error.h"

namespace artel::plan {

GroupPlacement place_group(const Cluster& c, int64_t size, int64_t stride, Route route) {
  ARTEL_CHECK(size >= 1 && stride >= 1, "place_group: size and stride must be >= 1");
  const int64_t per_host_ranks = c.per_host();
  // Members of one host: those within one host's span of consecutive ranks.
  const int64_t per_host = std::clamp<int64_t>(per_host_ranks / stride, 1, size);
  return {size, per_host, (size + per_host - 1) / per_host, route};
}

namespace {

// Per-worker bandwidth and per-step latency of a ring over the group.
struct Ring {
  double alpha, beta;
};

Ring ring_of(const Cluster& c, const GroupPlacement& g) {
  if (!g.crosses_hosts()) return {c.intra_host.alpha.value, c.intra_host.beta.value};
  if (g.route == Route::own_network_share || g.per_host == 1) return {c.inter_host.alpha.value, c.inter_host.beta.value};
  const double across = static_cast<double>(g.per_host) * c.inter_host.beta.value;
  const double beta = std::min(c.intra_host.beta.value, across);
  return {c.inter_host.alpha.value, beta};
}

// One pass (reduce-scatter or all-gather) of a ring of n: n−1 steps of S/n bytes.
double pass_over(const Ring& r, int64_t members, double bytes) {
  if (members <= 1 || bytes <= 0) return 0;
  const double n = static_cast<double>(members);
  return (n - 1) * r.alpha + (n - 1) / n * bytes / r.beta;
}

double ring_pass(const Cluster& c, const GroupPlacement& g, double bytes) {
  return pass_over(ring_of(c, g), g.size, bytes);
}

// With one member a host, artel's hierarchy is the plain ring across hosts.
bool hierarchical(const GroupPlacement& g) {
  return g.route == Route::hierarchical && g.crosses_hosts() && g.per_host > 1;
}

// Route::hierarchical's two halves: the pass inside a host over all the
// bytes, and the one across hosts over a worker's 1/k of them.
double inside_pass(const Cluster& c, const GroupPlacement& g, double bytes) {
  return pass_over({c.intra_host.alpha.value, c.intra_host.beta.value}, g.per_host, bytes);
}
double across_pass(const Cluster& c, const GroupPlacement& g, double bytes) {
  return pass_over({c.inter_host.alpha.value, c.inter_host.beta.value}, g.hosts,
                   bytes / static_cast<double>(g.per_host));
}

// A hierarchical collective in `chunks` equal chunks, each `inside` on the
// host's passes and `across` on the links': one chunk's inside runs under
// another's across (Note [Pipelined hierarchical all-reduce]), all but the
// first chunk's and the last one's.
double pipelined(double inside, double across, double chunks) {
  return inside + across + (chunks - 1) * std::max(inside, across);
}
double chunks_of(double bytes, size_t chunk_bytes) {
  return std::max(1.0, std::ceil(bytes / static_cast<double>(chunk_bytes)));
}

}  // namespace

// The all-reduce goes in chunks of comm::kHierarchicalChunkBytes, pipelined;
// the reduce-scatter and all-gather one piece after another.
double all_reduce_seconds(const Cluster& c, const GroupPlacement& g, double bytes) {
  if (!hierarchical(g)) return 2 * ring_pass(c, g, bytes);
  const double chunks = chunks_of(bytes, comm::kHierarchicalChunkBytes), chunk = bytes / chunks;
  return pipelined(2 * inside_pass(c, g, chunk), 2 * across_pass(c, g, chunk), chunks);
}
double reduce_scatter_seconds(const Cluster& c, const GroupPlacement& g, double bytes) {
  if (hierarchical(g)) return inside_pass(c, g, bytes) + across_pass(c, g, bytes);
  return ring_pass(c, g, bytes);
}
double all_gather_seconds(const Cluster& c, const GroupPlacement& g, double bytes) {
  if (hierarchical(g)) return across_pass(c, g, bytes) + inside_pass(c, g, bytes);
  return ring_pass(c, g, bytes);
}

namespace {

// Bytes a worker's socket copies touch across hosts: 4 per byte sent or received.
double socket_bytes(const GroupPlacement& g, double bytes) {
  if (!g.crosses_hosts()) return 0;
  if (hierarchical(g)) {
    const double h = static_cast<double>(g.hosts);
    return 4 * (h - 1) / h * bytes / static_cast<double>(g.per_host);
  }
  const double n = static_cast<double>(g.size);
  return 4 * (n - 1) / n * bytes;
}

// A ring across hosts (a hierarchical collective with one member a host is
// one) runs over MPI alone; the others have steps inside a host, over its segment.
bool ring_across_hosts(const GroupPlacement& g) { return g.crosses_hosts() && !hierarchical(g); }

}  // namespace

double all_reduce_copy_bytes(const GroupPlacement& g, double bytes, bool registered) {
  if (g.size <= 1 || bytes <= 0) return 0;
  if (ring_across_hosts(g)) {
    const double n = static_cast<double>(g.size);
    return 2 * socket_bytes(g, bytes) + 2 * (n - 1) / n * bytes;
  }
  // Inside the host: a reduce-scatter over its k members, then an all-gather's copy out.
  const double inside = reduce_scatter_copy_bytes(g.crosses_hosts() ? GroupPlacement{g.per_host, g.per_host, 1} : g,
                                                  bytes, registered && !hierarchical(g)) +
                        2 * bytes;
  if (!hierarchical(g)) return inside;
  return inside + 2 * socket_bytes(g, bytes);
}

double all_gather_copy_bytes(const GroupPlacement& g, double bytes) {
  if (g.size <= 1 || bytes <= 0) return 0;
  if (ring_across_hosts(g)) return socket_bytes(g, bytes);
  const double reorder = hierarchical(g) ? 2 * bytes : 0;
  return 2 * bytes + reorder + socket_bytes(g, bytes);
}

double reduce_scatter_copy_bytes(const GroupPlacement& g, double bytes, bool registered) {
  if (g.size <= 1 || bytes <= 0) return 0;
  if (ring_across_hosts(g)) {
    const double n = static_cast<double>(g.size);
    return socket_bytes(g, bytes) + 2 * (n - 1) / n * bytes;
  }
  const double k = static_cast<double>(g.per_host);
  const double staged = registered && !hierarchical(g) ? 0 : 2 * bytes;  // across hosts, never registered
  const double reorder = hierarchical(g) ? 2 * bytes : 0;
  return staged + bytes + bytes / k + reorder + socket_bytes(g, bytes);
}

double send_seconds(const Cluster& c, bool crosses_hosts, double bytes) {
  if (bytes <= 0) return 0;
  const Link& l = crosses_hosts ? c.inter_host : c.intra_host;
  return l.alpha.value + bytes / l.beta.value;
}

}  // namespace artel::plan
