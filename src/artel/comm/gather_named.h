// gather_named: every rank of a group sends a list of named tensors — names,
// shapes and dtypes free to differ between ranks — to one root. This is how
// the shards of a model-parallel job come together on one worker (to write
// the whole model's weights, or a checkpoint).
//
//   NamedTensors mine = {{"transformer.h.2.ln_1.weight", w}, ...};
//   std::vector<NamedTensors> all = gather_named(group, mine);   // root: one list per rank; others: {}
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "artel/comm/process_group.h"

namespace artel::comm {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// Collective over `group` (every rank calls it). The root gets every rank's
// list in rank order (its own included, by handle); the others get an empty
// vector. Tensors must be contiguous (every artel Tensor is).
std::vector<NamedTensors> gather_named(ProcessGroup& group, const NamedTensors& mine, int root = 0);

}  // namespace artel::comm
