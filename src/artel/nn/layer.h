// Layer: a Module that maps one Variable to one Variable, so layers can be
// chained by Sequential. Modules with other inputs (Embedding takes ids, a
// model takes a batch) are plain Modules with their own forward.
//
//   std::shared_ptr<Layer> l = std::make_shared<ReLU>();
//   Variable y = l->forward(x);
#pragma once

#include "artel/nn/module.h"

namespace artel::nn {

class Layer : public Module {
 public:
  virtual Variable forward(const Variable& x) = 0;
};

}  // namespace artel::nn
