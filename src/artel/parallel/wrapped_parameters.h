// What a data-parallel wrapper (DistributedDataParallel, FSDP) assumes of the
// parameters it is given, checked before it copies or shards any: each one
// trained (requires a gradient), each tensor listed once, and the same list
// of names and shapes on every rank of the group, in the same order. The
// collectives under them check only sizes, so without this ranks that built
// different models (another width, another declaration order) trained apart
// silently, and a module registered twice was stepped twice.
//
//   check_wrapped_parameters("DistributedDataParallel", wrapped_of(params), group);  // a collective
#pragma once

#include <string>
#include <vector>

#include "artel/autograd/variable.h"
#include "artel/comm/process_group.h"
#include "artel/core/tensor.h"

namespace artel::parallel {

struct WrappedParameter {
  std::string name;
  Shape shape;
  autograd::Variable variable;  // its identity and requires_grad; its value may not exist yet (FSDP's declared ones)
};

// Throws an Error naming the parameter ("WHO: parameter 'x' is frozen ...")
// or, for ranks that disagree, the first parameter where they differ and
// both ranks' versions of it. Collective over `group` (all ranks call it).
void check_wrapped_parameters(const std::string& who, const std::vector<WrappedParameter>& params,
                              comm::ProcessGroup& group);

}  // namespace artel::parallel
