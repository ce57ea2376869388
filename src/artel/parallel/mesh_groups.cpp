#include "artel/parallel/mesh_groups.h"

#include <algorithm>
#include <vector>

namespace artel::parallel {

namespace {

// new_group over every list, in the same order on every rank; returns the one
// holding this rank (null when it has a single member).
std::shared_ptr<comm::ProcessGroup> mine(comm::ProcessGroup& world, const std::vector<std::vector<int>>& lists) {
  std::shared_ptr<comm::ProcessGroup> found;
  for (const auto& ranks : lists) {
    if (ranks.size() < 2) continue;
    auto g = world.new_group(ranks);
    if (g) found = g;
  }
  return found;
}

}  // namespace

MeshGroups make_mesh_groups(std::shared_ptr<comm::ProcessGroup> world, int pp, int tp, size_t link_message_bytes,
                            bool ring) {
  MeshGroups g;
  g.topology = Topology::for_world(world->size(), pp, tp);
  const int rank = world->rank();
  const Topology& topo = g.topology;
  g.coord = topo.coord_of(rank);
  g.world = world;
  g.tp = mine(*world, topo.group_ranks(Axis::tp));
  g.dp = mine(*world, topo.group_ranks(Axis::dp));

  std::vector<std::vector<int>> replicas(static_cast<size_t>(topo.degree(Axis::dp)));
  for (int r = 0; r < topo.world(); ++r) replicas[static_cast<size_t>(topo.coord_of(r).dp)].push_back(r);
  g.replica = mine(*world, replicas);

  // Two groups per neighbouring pair, one per direction (Note [Pipeline links]),
  // then the embedding pair. Every rank walks every pipeline in the same order.
  const int P = topo.degree(Axis::pp);
  const int links = ring && P > 1 ? P : P - 1;  // a ring's last link: stage P-1 to stage 0
  for (const auto& pipe : topo.group_ranks(Axis::pp)) {
    for (int s = 0; s < links; ++s) {
      std::vector<int> pair = {pipe[static_cast<size_t>(s)], pipe[static_cast<size_t>((s + 1) % P)]};
      auto activations = world->new_group(pair, {.message_bytes = link_message_bytes});
      auto grads = world->new_group(pair, {.message_bytes = link_message_bytes});
      if (!activations) continue;
      if (rank == pair[0]) g.links.activations_to_next = activations, g.links.grads_from_next = grads;
      else g.links.activations_from_prev = activations, g.links.grads_to_prev = grads;
    }
    if (P > 1) {
      auto e = world->new_group({pipe.front(), pipe.back()});
      if (e) g.embedding = e;
    }
  }
  return g;
}

size_t pipeline_link_bytes(double hand_over_bytes, int64_t hand_overs) {
  constexpr double kHeaders = 2 * 64 + 1024, kCap = 64ull << 20;  // the executor's header of each message
  return static_cast<size_t>(std::min(kCap, (hand_over_bytes + kHeaders) * static_cast<double>(hand_overs)));
}

}  // namespace artel::parallel
