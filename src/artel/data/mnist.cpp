#include "artel/data/mnist.h"

#include <filesystem>

#include "artel/core/error.h"
#include "artel/data/gz_file.h"

namespace artel::data {

namespace fs = std::filesystem;

namespace {

constexpr const char* kHint = "use the original MNIST files (e.g. t10k-images-idx3-ubyte.gz), downloaded again";

uint32_t read_be32(const std::vector<uint8_t>& b, size_t at) {
  return (uint32_t{b[at]} << 24) | (uint32_t{b[at + 1]} << 16) | (uint32_t{b[at + 2]} << 8) | uint32_t{b[at + 3]};
}

[[noreturn]] void fail(const std::string& path, const std::string& what) { throw Error(path + ": " + what, kHint); }

// Checks the magic and that the payload after a `header`-byte header is exactly
// `expect` bytes long.
void check_header(const std::string& path, const std::vector<uint8_t>& b, size_t header, uint32_t magic,
                  const char* kind) {
  if (b.size() < header)
    fail(path, "file is " + std::to_string(b.size()) + " bytes, shorter than the " + std::to_string(header) +
                   "-byte IDX header (truncated?)");
  uint32_t got = read_be32(b, 0);
  if (got != magic)
    fail(path, "magic number " + std::to_string(got) + ", expected " + std::to_string(magic) + " (IDX " + kind +
                   " file)");
}

void check_length(const std::string& path, const std::vector<uint8_t>& b, size_t header, uint64_t expect,
                  const std::string& promise) {
  uint64_t have = b.size() - header;
  if (have < expect)
    fail(path, "holds " + std::to_string(have) + " data bytes but the header promises " + promise + " = " +
                   std::to_string(expect) + " (truncated file)");
  if (have > expect)
    fail(path, "holds " + std::to_string(have - expect) + " bytes after the " + promise + " = " +
                   std::to_string(expect) + " the header promises");
}

}  // namespace

IdxImages read_idx_images(const std::string& path) {
  std::vector<uint8_t> b = read_gz_file(path);
  check_header(path, b, 16, kIdxImagesMagic, "images");
  IdxImages img;
  img.count = read_be32(b, 4), img.rows = read_be32(b, 8), img.cols = read_be32(b, 12);
  if (img.count == 0) fail(path, "header says the file holds 0 images");
  if (img.rows != 28 || img.cols != 28)
    fail(path, "images are " + std::to_string(img.rows) + "x" + std::to_string(img.cols) +
                   ", expected 28x28 (MNIST)");
  uint64_t expect = static_cast<uint64_t>(img.count) * img.rows * img.cols;
  check_length(path, b, 16, expect, std::to_string(img.count) + " images x 28 x 28");
  img.pixels.assign(b.begin() + 16, b.end());
  return img;
}

std::vector<uint8_t> read_idx_labels(const std::string& path) {
  std::vector<uint8_t> b = read_gz_file(path);
  check_header(path, b, 8, kIdxLabelsMagic, "labels");
  uint32_t count = read_be32(b, 4);
  if (count == 0) fail(path, "header says the file holds 0 labels");
  check_length(path, b, 8, count, std::to_string(count) + " labels");
  for (size_t i = 8; i < b.size(); ++i)
    if (b[i] > 9) fail(path, "label " + std::to_string(b[i]) + " at index " + std::to_string(i - 8) + ", expected 0..9");
  return {b.begin() + 8, b.end()};
}

namespace {

// The single file in `dir` whose name contains `stem` (plain or .gz); "" if none.
std::string find_one(const std::string& dir, const std::string& stem, bool throw_if_ambiguous) {
  std::string found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::string name = entry.path().filename().string();
    size_t at = name.find(stem);
    if (at == std::string::npos || !entry.is_regular_file(ec)) continue;
    std::string tail = name.substr(at + stem.size());
    if (tail != "" && tail != ".gz") continue;
    if (!found.empty()) {
      if (!throw_if_ambiguous) return "";
      throw Error("MNIST directory " + dir + " holds more than one *" + stem + " file (" +
                      fs::path(found).filename().string() + ", " + name + ")",
                  "keep one images and one labels file per directory");
    }
    found = entry.path().string();
  }
  return found;
}

}  // namespace

MnistFiles find_mnist_files(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw Error("MNIST directory " + dir + " does not exist or is not a directory", "check the path passed to --data");
  MnistFiles f{find_one(dir, "images-idx3-ubyte", true), find_one(dir, "labels-idx1-ubyte", true)};
  if (f.images.empty() || f.labels.empty())
    throw Error("MNIST directory " + dir + " lacks its " + (f.images.empty() ? "images" : "labels") +
                    " file (*" + (f.images.empty() ? "images-idx3-ubyte" : "labels-idx1-ubyte") + "[.gz])",
                "put both IDX files (e.g. t10k-images-idx3-ubyte.gz and t10k-labels-idx1-ubyte.gz) in it");
  return f;
}

bool looks_like_mnist_dir(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return false;
  return !find_one(dir, "images-idx3-ubyte", false).empty() || !find_one(dir, "labels-idx1-ubyte", false).empty();
}

MnistData load_mnist(const MnistFiles& files) {
  IdxImages img = read_idx_images(files.images);
  std::vector<uint8_t> labels = read_idx_labels(files.labels);
  if (static_cast<int64_t>(labels.size()) != img.count)
    throw Error(files.labels + ": holds " + std::to_string(labels.size()) + " labels but " + files.images +
                    " holds " + std::to_string(img.count) + " images",
                "use an images file and the labels file of the same set");
  const int64_t n = img.count, n_train = n * 8 / 10, pix = img.rows * img.cols;
  if (n_train == 0 || n_train == n)
    throw Error(files.images + ": " + std::to_string(n) + " images are too few to split 80/20 into train and validation",
                "use a file with at least 5 images");
  MnistData d;
  d.rows = img.rows, d.cols = img.cols;
  Tensor x = Tensor::empty({n, pix});
  Tensor y = Tensor::empty({n}, DType::i64);
  float* xp = x.data<float>();
  int64_t* yp = y.data<int64_t>();
  for (int64_t i = 0; i < n * pix; ++i) xp[i] = mnist_normalize(img.pixels[i]);
  for (int64_t i = 0; i < n; ++i) yp[i] = labels[i];
  d.train_x = x.slice0(0, n_train), d.val_x = x.slice0(n_train, n);
  d.train_y = y.slice0(0, n_train), d.val_y = y.slice0(n_train, n);
  return d;
}

MnistData load_mnist(const std::string& dir) { return load_mnist(find_mnist_files(dir)); }

}  // namespace artel::data
