// Where a parameter server keeps each parameter: a pure function, as MXNet's
// kvstore decides it. Parameters are partitioned over the servers by bytes:
// a large tensor (at least split_threshold elements; MXNet's
// MXNET_KVSTORE_BIGARRAY_BOUND is 1e6) is cut into one contiguous part per
// server, so no server carries it alone; the small ones are placed whole,
// largest first, each on the server holding the fewest elements so far
// (ties: the lowest server), which keeps the servers within one small
// tensor of each other. A tensor with a unit (a sparse table's row) is cut
// only between units, so each of its rows lives on one server.
//
//   auto plan = plan_ps_shards({{"wte", 3'000'000}, {"ln.w", 64}, {"fc.w", 4096}}, 2);
//   // plan[0].parts: server 0 [0, 1'500'000), server 1 [1'500'000, 3'000'000)
//   // plan[2].parts: server 0 [0, 4096) whole; plan[1].parts: server 1 [0, 64)
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace artel::parallel {

struct PsPart {
  int server = 0;
  int64_t begin = 0, end = 0;  // elements [begin, end) of the flat parameter
};

struct PsPlacement {
  std::string name;
  std::vector<PsPart> parts;  // in element order; together they cover [0, numel) once
};

// params: (name, elements) in the model's order; the plan keeps that order.
// units: elements per indivisible unit of each parameter (empty: 1 each).
// Throws artel::Error for servers < 1, a negative size, a unit that does not
// divide its size, or a repeated name.
std::vector<PsPlacement> plan_ps_shards(const std::vector<std::pair<std::string, int64_t>>& params, int servers,
                                        int64_t split_threshold = 1'000'000, const std::vector<int64_t>& units = {});

// The elements each server keeps under `plan`.
std::vector<int64_t> ps_server_elements(const std::vector<PsPlacement>& plan, int servers);

}  // namespace artel::parallel
