// A model and a dataset of a user's own, for the tests that train them
// through the loop: two linear layers over rows whose class is the index of
// their largest of the first three features.
#pragma once

#include <algorithm>
#include <memory>
#include <utility>

#include "artel/core/rng.h"
#include "artel/data/dataset.h"
#include "artel/nn/activations.h"
#include "artel/nn/linear.h"
#include "artel/nn/model.h"

namespace artel::train {

class TwoLayer : public nn::Model {
 public:
  explicit TwoLayer(int64_t hidden = 16) {
    fc1_ = register_module("fc1", std::make_shared<nn::Linear>(4, hidden));
    relu_ = register_module("relu", std::make_shared<nn::ReLU>());
    fc2_ = register_module("fc2", std::make_shared<nn::Linear>(hidden, 3));
    set_plan({.pieces = {nn::layer_piece("fc1", *fc1_), nn::layer_piece("relu", *relu_), nn::layer_piece("fc2", *fc2_)}});
  }

 private:
  std::shared_ptr<nn::Linear> fc1_, fc2_;
  std::shared_ptr<nn::ReLU> relu_;
};

// Rows whose class is the index of their largest of the first three features
// (said to be of `classes` classes: more than 3 describes a model's data wrongly).
inline std::unique_ptr<data::Dataset> argmax_rows(int64_t n, int64_t classes = 3) {
  Rng rng(3);
  auto split = [&](int64_t rows) {
    Tensor x = Tensor::empty({rows, 4}), y = Tensor::empty({rows}, DType::i64);
    for (int64_t i = 0; i < rows; ++i) {
      for (int j = 0; j < 4; ++j) x.data<float>()[i * 4 + j] = rng.normal();
      const float* r = x.data<float>() + i * 4;
      y.data<int64_t>()[i] = std::max_element(r, r + 3) - r;
    }
    return std::pair{x, y};
  };
  auto [tx, ty] = split(n);
  auto [vx, vy] = split(n / 4);
  return std::make_unique<data::TensorDataset>(tx, ty, vx, vy, classes, "argmax rows");
}

}  // namespace artel::train
