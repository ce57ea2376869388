#include "artel/nn/sequential.h"

#include <string>

namespace artel::nn {

Sequential::Sequential(std::vector<std::shared_ptr<Layer>> layers) {
  for (auto& l : layers) add(std::move(l));
}

void Sequential::add(std::shared_ptr<Layer> layer) {
  layers_.push_back(register_module(std::to_string(layers_.size()), std::move(layer)));
}

Variable Sequential::forward(const Variable& x) {
  Variable h = x;
  for (auto& l : layers_) h = l->forward(h);
  return h;
}

}  // namespace artel::nn
