// The 3-D parallel layout (after DeepSpeed's pipe/topology.py): which
// (data-parallel, pipeline, tensor-parallel) coordinates each rank has, and every
// group of ranks along one axis, all derived from one object.
//
// Ranks are laid out with tp varying fastest, then pp, then dp (Megatron's
// order), so the ranks of a tensor-parallel group — which talk every layer —
// are adjacent, i.e. on the same host when hosts hold consecutive ranks.
//
//   Topology topo(/*world=*/8, /*dp=*/2, /*pp=*/2, /*tp=*/2);
//   topo.coord_of(5);                  // {dp 1, pp 0, tp 1}
//   topo.group_of(5, Axis::tp);        // {4, 5}
//   topo.group_of(5, Axis::pp);        // {5, 7}: stage s of my pipeline is [s]
//   topo.group_ranks(Axis::dp);        // {{0,4},{1,5},{2,6},{3,7}}
#pragma once

#include <string_view>
#include <vector>

namespace artel::parallel {

enum class Axis { dp, pp, tp };
std::string_view axis_name(Axis axis);  // "dp", "pp", "tp"

struct Coord {
  int dp = 0;
  int pp = 0;
  int tp = 0;
  bool operator==(const Coord&) const = default;
};

class Topology {
 public:
  // Throws Error unless all degrees are >= 1 and dp * pp * tp == world.
  Topology(int world, int dp, int pp, int tp);
  // dp = world / (pp * tp); throws Error when pp * tp does not divide world.
  static Topology for_world(int world, int pp, int tp);

  int world() const { return world_; }
  int degree(Axis axis) const;

  Coord coord_of(int rank) const;
  int rank_of(const Coord& coord) const;

  // Every group along `axis` (the ranks that differ only in that coordinate),
  // each sorted by that coordinate; together they partition the world.
  std::vector<std::vector<int>> group_ranks(Axis axis) const;
  // The group along `axis` that holds `rank`; its index in it is coord_of(rank)'s.
  std::vector<int> group_of(int rank, Axis axis) const;

 private:
  int world_;
  int dp_;
  int pp_;
  int tp_;
};

}  // namespace artel::parallel
