// Which ranks of a group share a host, so that collectives can keep traffic
// on a host in shared memory and send only what must cross between hosts
// (Horovod's hierarchical all-reduce). Hosts are told apart by hostname
// (scripts/cluster.sh gives each of its namespaced hosts its own), exchanged
// over the group itself.
//
//   HostMap hosts = host_map(*pg);        // collective: every rank calls it
//   hosts.describe();                     // "2 hosts (2,2 ranks)"
//   hosts.ranks[hosts.host_of[pg->rank()]];   // my host's ranks
#pragma once

#include <string>
#include <vector>

#include "artel/comm/process_group.h"

namespace artel::comm {

struct HostMap {
  std::vector<std::string> names;       // per host, in the order of their lowest rank
  std::vector<int> host_of;             // per rank: its host's index
  std::vector<std::vector<int>> ranks;  // per host: its ranks, ascending
  // "1 host" or "3 hosts (2,1,2 ranks)"
  std::string describe() const;
};

// From each rank's hostname. Throws Error on an empty name.
HostMap host_map(const std::vector<std::string>& hostname_of_rank);
// This machine's hostname exchanged over `pg` (an all_gather): collective.
HostMap host_map(ProcessGroup& pg);

}  // namespace artel::comm
