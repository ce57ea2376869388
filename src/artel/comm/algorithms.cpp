#include "artel/comm/algorithms.h"

namespace artel::comm {

const char* op_kind_name(OpKind kind) {
  switch (kind) {
    case OpKind::all_reduce: return "all_reduce";
    case OpKind::broadcast: return "broadcast";
    case OpKind::reduce: return "reduce";
    case OpKind::all_gather: return "all_gather";
    case OpKind::reduce_scatter: return "reduce_scatter";
    case OpKind::all_to_all: return "all_to_all";
    case OpKind::gather: return "gather";
    case OpKind::scatter: return "scatter";
    case OpKind::barrier: return "barrier";
  }
  return "?";
}

const std::vector<Algorithm>& algorithms() {
  static const std::vector<Algorithm> table = {
      {OpKind::all_reduce, "one_shot", true, all_reduce_one_shot},
      {OpKind::all_reduce, "two_shot", true, all_reduce_two_shot},
      {OpKind::all_reduce, "ring", false, all_reduce_ring},
      {OpKind::all_reduce, "all_pairs", false, all_reduce_all_pairs},
      {OpKind::all_reduce, "hierarchical", false, all_reduce_hierarchical},
      {OpKind::reduce, "shared", true, reduce_shared},
      {OpKind::reduce, "binomial_tree", false, reduce_binomial_tree},
      {OpKind::broadcast, "shared", true, broadcast_shared},
      {OpKind::broadcast, "binomial_tree", false, broadcast_binomial_tree},
      {OpKind::all_gather, "shared", true, all_gather_shared},
      {OpKind::all_gather, "ring", false, all_gather_ring},
      {OpKind::all_gather, "hierarchical", false, all_gather_hierarchical},
      {OpKind::reduce_scatter, "shared", true, reduce_scatter_shared},
      {OpKind::reduce_scatter, "ring", false, reduce_scatter_ring},
      {OpKind::reduce_scatter, "hierarchical", false, reduce_scatter_hierarchical},
      {OpKind::all_to_all, "pairwise", false, all_to_all_pairwise},
      {OpKind::gather, "linear", false, gather_linear},
      {OpKind::scatter, "linear", false, scatter_linear},
      {OpKind::barrier, "shared", true, barrier_shared},
      {OpKind::barrier, "dissemination", false, barrier_dissemination},
      {OpKind::all_reduce, "native", false, run_native},
      {OpKind::reduce, "native", false, run_native},
      {OpKind::broadcast, "native", false, run_native},
      {OpKind::all_gather, "native", false, run_native},
      {OpKind::reduce_scatter, "native", false, run_native},
      {OpKind::all_to_all, "native", false, run_native},
      {OpKind::gather, "native", false, run_native},
      {OpKind::scatter, "native", false, run_native},
      {OpKind::barrier, "native", false, run_native},
  };
  return table;
}

namespace {

const Algorithm* find(OpKind kind, const std::string& name) {
  for (const auto& a : algorithms())
    if (a.kind == kind && name == a.name) return &a;
  return nullptr;
}

// Size-based choice (see docs/COLLECTIVES.md for the measurements behind it).
const char* auto_name(const Collective& c, bool shared, int world) {
  size_t bytes = c.block_bytes();
  switch (c.kind) {
    case OpKind::all_reduce:
      if (shared) return bytes <= (64u << 10) ? "one_shot" : "two_shot";
      return bytes <= (16u << 10) || c.count < static_cast<size_t>(world) ? "all_pairs" : "ring";
    case OpKind::reduce: return shared ? "shared" : "binomial_tree";
    case OpKind::broadcast: return shared ? "shared" : "binomial_tree";
    case OpKind::all_gather: return shared ? "shared" : "ring";
    case OpKind::reduce_scatter: return shared ? "shared" : "ring";
    case OpKind::all_to_all: return "pairwise";
    case OpKind::gather: return "linear";
    case OpKind::scatter: return "linear";
    case OpKind::barrier: return shared ? "shared" : "dissemination";
  }
  return "";
}

// Whether `auto` hands this op to the backend's library. Not a reduce-scatter:
// OpenMPI 4.1's reduce_scatter_block (its tuned choice, "basic linear") is a
// reduce to one rank and a scatter, 1.5 times the bytes of a ring between two
// hosts, through two temporaries the size of the whole input. Between 2 hosts
// at 1 Gbit/s it took 197/410 ms for 16/32 MiB where the ring took 131/272.
// Nor an all-gather across hosts from kRingAllGatherAcrossHostsBytes
// gathered: on 3 hosts of 2, 1 and 2 ranks at 1 Gbit/s (AMD Zen 3), OpenMPI's
// took 450-464 µs, 1049-1057 µs and 747-853 ms for 64 KiB, 128 KiB and 64 MiB
// where the ring took 351-513 µs, 507-534 µs and 451 ms (95% of the one-rank
// host's link, which must carry 4/5 of it); below 64 KiB OpenMPI's was faster
// (220-320 µs against 265-570).
constexpr size_t kRingAllGatherAcrossHostsBytes = size_t{64} << 10;
bool auto_is_native(const Collective& c, bool native, const Transport& t) {
  if (!native || c.kind == OpKind::reduce_scatter) return false;
  if (c.kind != OpKind::all_gather || !t.spans_hosts()) return true;
  return c.block_bytes() * static_cast<size_t>(t.size()) < kRingAllGatherAcrossHostsBytes;
}

}  // namespace

void check_algorithm_name(OpKind kind, const std::string& name) {
  if (name.empty() || name == "auto" || find(kind, name)) return;
  std::string names;
  for (const auto& x : algorithms())
    if (x.kind == kind) names += std::string(names.empty() ? "" : ", ") + x.name;
  throw Error(std::string("unknown ") + op_kind_name(kind) + " algorithm '" + name + "'",
              "choose one of: auto, " + names + " (docs/COLLECTIVES.md)");
}

const Algorithm& choose_algorithm(const Collective& c, Transport& t) {
  bool shared = t.shared() != nullptr;
  bool native = t.native() && t.native()->supports(c);
  if (c.algorithm.empty() || c.algorithm == "auto") {
    if (hierarchical_fits(c, t)) return *find(c.kind, "hierarchical");
    return *find(c.kind, auto_is_native(c, native, t) ? "native" : auto_name(c, shared, t.size()));
  }
  check_algorithm_name(c.kind, c.algorithm);
  const Algorithm* a = find(c.kind, c.algorithm);
  if (a->needs_shared && !shared)
    throw Error(std::string(op_kind_name(c.kind)) + " algorithm '" + a->name + "' needs shared memory, which this backend lacks",
                "use algorithm 'auto' or a point-to-point one");
  if (std::string(a->name) == "hierarchical" && !hierarchical_fits(c, t))
    throw Error(std::string(op_kind_name(c.kind)) + " algorithm 'hierarchical' is not available: " +
                    (!t.hierarchy() ? "the group is not spread over several hosts with several ranks on one"
                     : c.kind != OpKind::all_reduce && !t.hierarchy()->equal_hosts()
                         ? "its blocks need hosts of equal rank counts, and these are " + t.hierarchy()->describe()
                         : "the links between hosts cannot reduce this dtype/op"),
                "use algorithm 'auto'");
  if (c.algorithm == "native" && !native)
    throw Error(std::string(op_kind_name(c.kind)) + " algorithm 'native' is not available: " +
                    (t.native() ? "the backend's library cannot run this dtype/op/size" : "this backend has no library of its own"),
                "use algorithm 'auto'");
  return *a;
}

void run_collective(Transport& t, const Collective& c, const OpContext& ctx) { choose_algorithm(c, t).run(t, c, ctx); }

void run_native(Transport& t, const Collective& c, const OpContext& ctx) { t.native()->run(c, ctx); }

}  // namespace artel::comm
