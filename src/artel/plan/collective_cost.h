// Collective costs by the alpha-beta model, for a group of workers placed on
// a cluster (docs/COLLECTIVES.md has the algorithms; these are their costs).
//
// A group of n workers with k of them on each of H hosts (n = k·H). A ring
// inside one host runs at the intra-host link. A ring that crosses hosts
// runs as k rings side by side, each leaving a host through a different
// worker's share of the network (NCCL's channels over one NIC per GPU), so
// per worker it moves data at min(beta_intra, k · beta_inter): the slowest
// link the rings cross sets the rate. Every ring step pays alpha of the
// slowest link it crosses.
//
//   ring all-reduce of S bytes:       2(n−1)·alpha + 2(n−1)/n · S / beta
//   reduce-scatter or all-gather:      (n−1)·alpha +  (n−1)/n · S / beta
//   a send of S bytes:                     alpha   +            S / beta
//
// S is the whole buffer (an all-gather's output, a reduce-scatter's input).
//
// Route::own_network_share is the other way a ring can cross hosts: one
// flat ring over the group in which each worker's traffic leaves its host
// only through that worker's own share of the network, beta = beta_inter
// (the host's network rate / workers a host). ZeRO-3 is costed this way
// (Note [ZeRO-3 over each worker's own network share], step_model.cpp).
//
// Route::hierarchical is artel's own way across hosts
// (comm/all_reduce_hierarchical.cpp and its reduce-scatter and all-gather):
// a ring inside each host over all S bytes, then k rings across the hosts
// side by side, each over S/k through one worker's share, then inside the
// host again. With h(B) = (H−1)·alpha_inter + (H−1)/H · B / beta_inter and
// i(B) the intra-host pass over k workers:
//
//   all-reduce:       i(S) + 2·h(S/k) + i(S)
//   reduce-scatter:   i(S) +   h(S/k)
//   all-gather:              h(S/k) + i(S)
//
//   GroupPlacement g = place_group(cluster, /*size=*/8, /*stride=*/1);   // a tp group
//   all_reduce_seconds(cluster, g, 64 << 20);
#pragma once

#include <cstdint>

#include "artel/plan/cluster.h"

namespace artel::plan {

// How a ring that spans hosts reaches the network.
enum class Route {
  all_network_shares,  // k rings side by side, one per member of a host: beta = min(beta_intra, k·beta_inter)
  own_network_share,   // every worker's traffic through its own share alone: beta = beta_inter
  hierarchical,        // inside the host, across hosts on S/k a worker, inside again (artel's)
};

struct GroupPlacement {
  int64_t size = 1;      // n
  int64_t per_host = 1;  // k: members on one host
  int64_t hosts = 1;     // H
  Route route = Route::all_network_shares;
  bool crosses_hosts() const { return hosts > 1; }
};

// The placement of a group of `size` ranks `stride` apart (ranks fill hosts
// in order): tp has stride 1, pp stride tp, dp stride tp·pp.
GroupPlacement place_group(const Cluster& c, int64_t size, int64_t stride,
                           Route route = Route::all_network_shares);

double all_reduce_seconds(const Cluster& c, const GroupPlacement& g, double bytes);
double reduce_scatter_seconds(const Cluster& c, const GroupPlacement& g, double bytes);
double all_gather_seconds(const Cluster& c, const GroupPlacement& g, double bytes);

// Note [A collective's copies]. Besides its time on the links, a collective
// costs its worker memory traffic: the copies of artel's algorithms, in
// bytes read plus bytes written, for a buffer of S bytes over a group of n
// (k a host, H hosts):
//   - inside a host (comm/*_shared.cpp), a buffer not from
//     ProcessGroup::alloc is staged through the host's segment: an
//     all-gather copies its block in and the whole buffer out (2·S); a
//     reduce-scatter copies its input in (2·S, none when registered) and
//     sums its block out of the k copies (S + S/k);
//   - a hierarchical collective (comm/*_hierarchical.cpp) also reorders the
//     blocks by slice (2·S), and every byte a worker sends or receives
//     across hosts is copied through a socket on each side: 4·(H−1)/H·S/k;
//   - an all-reduce is a reduce-scatter then an all-gather inside the host;
//     a hierarchical one (all_reduce_hierarchical.cpp) all-reduces S/k
//     across between the two (twice the sockets' bytes), with nothing to
//     reorder;
//   - a ring across hosts over MPI sends and receives (n−1)/n·S (4·(n−1)/n·S),
//     a reduce-scatter summing what it receives (2·(n−1)/n·S); an
//     all-reduce twice both.
// A worker with a core of its own does these in its idle moments. One that
// shares a core (time_sliced) has none: another worker takes its core
// whenever it waits, so its copies run in the time it waits for the
// collectives anyway and what does not fit lengthens its step
// (step_model.cpp's copies_on_core, for ZeRO-3's and DDP's overlapped
// collectives). W2's ZeRO-3 on the 2-host harness at half a core a worker
// measured 174-191 ms against 147.5 predicted without them (AMD Zen 3,
// 2026-11-28).
double all_reduce_copy_bytes(const GroupPlacement& g, double bytes, bool registered);
double all_gather_copy_bytes(const GroupPlacement& g, double bytes);
double reduce_scatter_copy_bytes(const GroupPlacement& g, double bytes, bool registered);
// One point-to-point message, over the link between hosts when it crosses one.
double send_seconds(const Cluster& c, bool crosses_hosts, double bytes);

}  // namespace artel::plan
