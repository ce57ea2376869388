#include "artel/parallel/topology.h"

#include <string>

#include "artel/core/error.h"

namespace artel::parallel {

namespace {

int get(const Coord& c, Axis axis) {
  switch (axis) {
    case Axis::dp: return c.dp;
    case Axis::pp: return c.pp;
    case Axis::tp: return c.tp;
  }
  return 0;
}

void set(Coord& c, Axis axis, int value) {
  switch (axis) {
    case Axis::dp: c.dp = value; break;
    case Axis::pp: c.pp = value; break;
    case Axis::tp: c.tp = value; break;
  }
}

}  // namespace

std::string_view axis_name(Axis axis) {
  switch (axis) {
    case Axis::dp: return "dp";
    case Axis::pp: return "pp";
    case Axis::tp: return "tp";
  }
  return "?";
}

Topology::Topology(int world, int dp, int pp, int tp) : world_(world), dp_(dp), pp_(pp), tp_(tp) {
  if (world < 1 || dp < 1 || pp < 1 || tp < 1) {
    throw Error(detail::concat("topology: world ", world, ", dp ", dp, ", pp ", pp, ", tp ", tp,
                               ": every degree must be at least 1"),
                "pass --nproc, --tp and --pp as positive integers");
  }
  if (static_cast<long long>(dp) * pp * tp != world) {
    throw Error(detail::concat("topology: dp ", dp, " x pp ", pp, " x tp ", tp, " = ",
                               static_cast<long long>(dp) * pp * tp, " does not match the world size ", world),
                "choose --tp and --pp whose product divides --nproc; data parallelism takes the rest");
  }
}

Topology Topology::for_world(int world, int pp, int tp) {
  if (world < 1 || pp < 1 || tp < 1) {
    throw Error(detail::concat("topology: world ", world, ", pp ", pp, ", tp ", tp,
                               ": every degree must be at least 1"),
                "pass --nproc, --tp and --pp as positive integers");
  }
  if (world % (static_cast<long long>(pp) * tp) != 0) {
    throw Error(detail::concat("topology: tp ", tp, " x pp ", pp, " = ", static_cast<long long>(pp) * tp,
                               " does not divide the world size ", world),
                "choose --tp and --pp whose product divides --nproc");
  }
  return Topology(world, world / (pp * tp), pp, tp);
}

int Topology::degree(Axis axis) const {
  return get(Coord{dp_, pp_, tp_}, axis);
}

Coord Topology::coord_of(int rank) const {
  ARTEL_CHECK(rank >= 0 && rank < world_, "topology: rank ", rank, " is outside the world of ", world_);
  return Coord{rank / (pp_ * tp_), (rank / tp_) % pp_, rank % tp_};
}

int Topology::rank_of(const Coord& c) const {
  ARTEL_CHECK(c.dp >= 0 && c.dp < dp_ && c.pp >= 0 && c.pp < pp_ && c.tp >= 0 && c.tp < tp_,
              "topology: coordinates {dp ", c.dp, ", pp ", c.pp, ", tp ", c.tp, "} are outside {", dp_, ", ", pp_,
              ", ", tp_, "}");
  return (c.dp * pp_ + c.pp) * tp_ + c.tp;
}

std::vector<int> Topology::group_of(int rank, Axis axis) const {
  Coord c = coord_of(rank);
  std::vector<int> group;
  for (int i = 0; i < degree(axis); ++i) {
    set(c, axis, i);
    group.push_back(rank_of(c));
  }
  return group;
}

std::vector<std::vector<int>> Topology::group_ranks(Axis axis) const {
  // One group per rank whose coordinate along `axis` is 0, in rank order.
  std::vector<std::vector<int>> groups;
  for (int rank = 0; rank < world_; ++rank) {
    if (get(coord_of(rank), axis) == 0) groups.push_back(group_of(rank, axis));
  }
  return groups;
}

}  // namespace artel::parallel
