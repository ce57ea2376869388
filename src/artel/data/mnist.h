// MNIST in IDX format (Yann LeCun's files, .gz or uncompressed): readers with
// checked headers, and the train / validation split the trainer uses.
//
// The project bundles the 10 000-image test set (data/mnist-t10k/); its first
// 8000 images train and the last 2000 validate. In general the first
// floor(0.8·N) train. Images are f32, normalised as (x/255 − 0.1307)/0.3081
// (the mean and std of MNIST's training images, as in PyTorch's examples), one
// row of 784 per image — a CNN views them as (N, 1, 28, 28). Labels are int64.
//
//   MnistData d = load_mnist("data/mnist-t10k");
//   d.train_x.shape();  // [8000, 784]
//   d.val_y.data<int64_t>()[0];
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "artel/core/tensor.h"

namespace artel::data {

constexpr uint32_t kIdxImagesMagic = 2051;  // 0x00000803: unsigned byte, 3 dims
constexpr uint32_t kIdxLabelsMagic = 2049;  // 0x00000801: unsigned byte, 1 dim
constexpr float kMnistMean = 0.1307f;
constexpr float kMnistStd = 0.3081f;

struct IdxImages {
  int64_t count = 0, rows = 0, cols = 0;
  std::vector<uint8_t> pixels;  // count·rows·cols, row-major
};

// Read and check an IDX image / label file. Each failure (missing file, wrong
// magic, bad dimensions, length not matching the header) is one artel::Error
// naming the file and what is wrong.
IdxImages read_idx_images(const std::string& path);
std::vector<uint8_t> read_idx_labels(const std::string& path);

// The normalised value of one raw pixel.
inline float mnist_normalize(uint8_t p) { return (static_cast<float>(p) / 255.0f - kMnistMean) / kMnistStd; }

struct MnistFiles {
  std::string images, labels;
};
// The image and label files in `dir`: one file whose name contains
// "images-idx3-ubyte" and one with "labels-idx1-ubyte" (each optionally .gz).
// Throws when either is missing or ambiguous.
MnistFiles find_mnist_files(const std::string& dir);
// True when `dir` is a directory holding both files (no throw).
bool looks_like_mnist_dir(const std::string& dir);

struct MnistData {
  Tensor train_x, val_x;  // (N, 784) f32, normalised
  Tensor train_y, val_y;  // (N) int64, in [0, 10)
  int64_t rows = 28, cols = 28;
};

MnistData load_mnist(const MnistFiles& files);
MnistData load_mnist(const std::string& dir);

}  // namespace artel::data
