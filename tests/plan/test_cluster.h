// A small cluster with round numbers for the planner's tests: 2 hosts of 4
// workers, 1 TFLOP/s at full efficiency, 100 GB/s memory, links of 10 GB/s
// (1 µs) inside a host and 1 GB/s (10 µs) between hosts.
#pragma once

#include <nlohmann/json.hpp>

#include "artel/plan/cluster.h"

namespace artel::plan::testing {

inline Cluster test_cluster(double memory_bytes = 64e9, int hosts = 2, int per_host = 4) {
  nlohmann::json j = {
      {"name", "test"},
      {"hosts", hosts},
      {"workers_per_host", per_host},
      {"device",
       {{"name", "unit"},
        {"peak_flops", {{"fp32", 1e12}, {"bf16", 2e12}}},
        {"gemm_efficiency", 1.0},
        {"memory_bytes", memory_bytes},
        {"memory_bandwidth", 1e11},
        {"memory_efficiency", 1.0}}},
      {"links", {{"intra_host", {{"alpha", 1e-6}, {"beta", 1e10}}}, {"inter_host", {{"alpha", 1e-5}, {"beta", 1e9}}}}}};
  return parse_cluster(j, "test cluster");
}

}  // namespace artel::plan::testing
