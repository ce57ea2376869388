#include "artel/data/dataset.h"

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "artel/core/error.h"

namespace artel::data {

namespace fs = std::filesystem;

DistributedSampler make_sampler(const Dataset& ds, SamplerConfig cfg) {
  return DistributedSampler(ds.num_train_items(), cfg);
}

namespace {

// Rows `samples` of (x, y) copied into a new batch.
Batch gather_rows(const Tensor& x, const Tensor& y, const std::vector<int64_t>& samples) {
  const int64_t b = static_cast<int64_t>(samples.size()), d = x.size(1);
  Batch out{Tensor::empty({b, d}), Tensor::empty({b}, DType::i64)};
  const float* xs = x.data<float>();
  const int64_t* ys = y.data<int64_t>();
  float* xo = out.x.data<float>();
  int64_t* yo = out.y.data<int64_t>();
  for (int64_t i = 0; i < b; ++i) {
    std::memcpy(xo + i * d, xs + samples[i] * d, static_cast<size_t>(d) * sizeof(float));
    yo[i] = ys[samples[i]];
  }
  return out;
}

// Rows of T+1 tokens of `tokens` from each start: x the first T, y the last T.
Batch gather_text(const TokenSplit& tokens, const std::vector<int64_t>& starts, int64_t T) {
  const int64_t b = static_cast<int64_t>(starts.size());
  Batch out{Tensor::empty({b, T}, DType::i64), Tensor::empty({b, T}, DType::i64)};
  int64_t* xo = out.x.data<int64_t>();
  int64_t* yo = out.y.data<int64_t>();
  for (int64_t i = 0; i < b; ++i) {
    for (int64_t t = 0; t < T; ++t) xo[i * T + t] = tokens[starts[i] + t], yo[i * T + t] = tokens[starts[i] + t + 1];
  }
  return out;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

void check_val_batch(int64_t batch, int64_t i, int64_t num) {
  ARTEL_CHECK(batch >= 1, "validation batch size must be >= 1, got ", batch);
  ARTEL_CHECK(i >= 0 && i < num, "validation batch ", i, " is outside [0, ", num, ")");
}

}  // namespace

TensorDataset::TensorDataset(Tensor train_x, Tensor train_y, Tensor val_x, Tensor val_y, int64_t classes,
                             std::string description, DatasetKind kind)
    : train_x_(std::move(train_x)), train_y_(std::move(train_y)), val_x_(std::move(val_x)), val_y_(std::move(val_y)),
      classes_(classes), description_(std::move(description)), kind_(kind) {
  ARTEL_CHECK(classes_ >= 1, "dataset ", description_, ": classes must be >= 1, got ", classes_);
  auto check = [&](const Tensor& x, const Tensor& y, const char* split) {
    ARTEL_CHECK(x.dtype() == DType::f32 && x.dim() == 2, "dataset ", description_, ": ", split,
                " x must be (N, D) float32, got ", shape_str(x.shape()));
    ARTEL_CHECK(y.dtype() == DType::i64 && y.dim() == 1 && y.size(0) == x.size(0), "dataset ", description_, ": ",
                split, " y must be (", x.size(0), ") int64, got ", shape_str(y.shape()));
    for (int64_t i = 0; i < y.numel(); ++i)
      ARTEL_CHECK(y.data<int64_t>()[i] >= 0 && y.data<int64_t>()[i] < classes_, "dataset ", description_, ": ", split,
                  " class ", y.data<int64_t>()[i], " at row ", i, " is outside [0, ", classes_, ")");
  };
  check(train_x_, train_y_, "train");
  check(val_x_, val_y_, "validation");
  ARTEL_CHECK(train_x_.size(0) >= 1 && train_x_.size(1) == val_x_.size(1), "dataset ", description_,
              ": needs train rows, and validation rows as wide as them");
}

Batch TensorDataset::train_batch(const DistributedSampler& sampler, int64_t k) const {
  ARTEL_CHECK(sampler.num_items() == num_train_items(), "sampler built over ", sampler.num_items(),
              " items, but the train split of ", description_, " has ", num_train_items(), " (hint: use make_sampler)");
  std::vector<int64_t> samples = sampler.draws(k);
  if (sampler.config().order == Order::sequential)
    for (int64_t& s : samples) s %= num_train_items();
  return gather_rows(train_x_, train_y_, samples);
}

int64_t TensorDataset::num_val_batches(int64_t batch) const {
  ARTEL_CHECK(batch >= 1, "validation batch size must be >= 1, got ", batch);
  return ceil_div(val_x_.size(0), batch);
}

Batch TensorDataset::val_batch(int64_t batch, int64_t i) const {
  check_val_batch(batch, i, num_val_batches(batch));
  const int64_t begin = i * batch, end = std::min(begin + batch, val_x_.size(0));
  std::vector<int64_t> samples;
  for (int64_t s = begin; s < end; ++s) samples.push_back(s);
  return gather_rows(val_x_, val_y_, samples);
}

MnistDataset::MnistDataset(MnistData data, std::string source)
    : TensorDataset(data.train_x, data.train_y, data.val_x, data.val_y, 10,
                    "MNIST " + source + ": " + std::to_string(data.train_x.size(0)) + " train / " +
                        std::to_string(data.val_x.size(0)) + " validation images of 28x28",
                    DatasetKind::mnist),
      data_(std::move(data)) {}

TextDataset::TextDataset(std::string path, std::string unit, int64_t vocab_size, TokenSplit train, TokenSplit val,
                         int64_t block_size)
    : path_(std::move(path)), unit_(std::move(unit)), vocab_size_(vocab_size), train_(std::move(train)),
      val_(std::move(val)), block_(block_size) {
  ARTEL_CHECK(block_ >= 1, "text block size must be >= 1, got ", block_);
  auto check_split = [&](const TokenSplit& split, const char* name) {
    if (split.size() < block_ + 1)
      throw Error(source_kind() + " " + path_ + " is too short: its " + name + " split has " +
                      std::to_string(split.size()) + " " + unit_ + ", one block needs " + std::to_string(block_ + 1),
                  unit_ == "tokens" ? "use more tokens or a smaller block size"
                                    : "use a longer text (the " + std::string(name) + " split is " +
                                          (std::string(name) == "train" ? "the first 90%" : "the last 10%") +
                                          ") or a smaller block size");
  };
  check_split(train_, "train");
  check_split(val_, "validation");
}

std::string TextDataset::source_kind() const {
  return unit_ == "words" ? "word text" : unit_ == "tokens" ? "token file" : "char text";
}

std::string TextDataset::describe() const {
  return source_kind() + " " + path_ + ": " + std::to_string(train_.size()) +
         " train / " + std::to_string(val_.size()) + " validation " + unit_ + ", vocabulary " +
         std::to_string(vocab_size_) + ", block " + std::to_string(block_);
}

namespace {
TokenSplit widened(const std::vector<uint8_t>& bytes) { return TokenSplit(std::vector<int32_t>(bytes.begin(), bytes.end())); }
}  // namespace

CharTextDataset::CharTextDataset(CharText text, int64_t block_size)
    : TextDataset(text.path, "characters", text.vocab.size(), widened(text.train), widened(text.val), block_size),
      text_(std::move(text)) {}

WordTextDataset::WordTextDataset(WordText text, int64_t block_size)
    : TextDataset(text.path, "words", text.vocab.size(), TokenSplit(std::move(text.train)), TokenSplit(std::move(text.val)),
                  block_size),
      vocab_(std::move(text.vocab)) {}

int64_t TextDataset::row_start(Order order, int64_t draw) const {
  if (order == Order::shuffle) return draw * block_;
  // (j·T) mod (n_train − T) without overflow for any j, T.
  const int64_t m = train_.size() - block_;
  return static_cast<int64_t>(static_cast<__int128>(draw) * block_ % m);
}

Batch TextDataset::train_batch(const DistributedSampler& sampler, int64_t k) const {
  ARTEL_CHECK(sampler.num_items() == num_train_items(), "sampler built over ", sampler.num_items(),
              " items, but the text train split has ", num_train_items(), " blocks of ", block_,
              " (hint: use make_sampler)");
  std::vector<int64_t> starts = sampler.draws(k);
  for (int64_t& s : starts) s = row_start(sampler.config().order, s);
  return gather_text(train_, starts, block_);
}

int64_t TextDataset::num_val_batches(int64_t batch) const {
  ARTEL_CHECK(batch >= 1, "validation batch size must be >= 1, got ", batch);
  return ceil_div((val_.size() - 1) / block_, batch);
}

Batch TextDataset::val_batch(int64_t batch, int64_t i) const {
  check_val_batch(batch, i, num_val_batches(batch));
  const int64_t rows = (val_.size() - 1) / block_;
  std::vector<int64_t> starts;
  for (int64_t r = i * batch; r < std::min((i + 1) * batch, rows); ++r) starts.push_back(r * block_);
  return gather_text(val_, starts, block_);
}

namespace {
TokenSplit train_part(const TokenFile& f, bool whole) {
  return whole ? f.tokens : f.tokens.slice(0, train_tokens(f.tokens.size()));
}
}  // namespace

TokenFileDataset::TokenFileDataset(TokenFile train, std::optional<TokenFile> val, int64_t vocab_size,
                                   int64_t block_size)
    : TextDataset(train.path + " (" + train.layout + ")" + (val ? " + " + val->path : ", last 10% validating"),
                  "tokens", vocab_size, train_part(train, val.has_value()),
                  val ? val->tokens : train.tokens.slice(train_part(train, false).size(), train.tokens.size()),
                  block_size) {}

std::string TokenFileDataset::decode(std::span<const int64_t> ids) const {
  std::string out;
  for (int64_t id : ids) {
    if (!out.empty()) out += ' ';
    out += std::to_string(id);
  }
  return out;
}

std::unique_ptr<Dataset> open_dataset(const std::string& path, const DatasetOptions& opts) {
  std::error_code ec;
  if (!fs::exists(path, ec)) throw Error("--data " + path + " does not exist", "check the path");
  if (fs::path(path).extension() != ".bin" && (!opts.val_path.empty() || opts.vocab_size > 0))
    throw Error("--val-data and --vocab-size go with token files (*.bin), and --data " + path + " is not one",
                "drop them: a text file or MNIST brings its own split and classes");
  if (fs::is_directory(path, ec)) {
    if (!looks_like_mnist_dir(path))
      throw Error("--data " + path + " is a directory without MNIST files (*images-idx3-ubyte[.gz], " +
                      "*labels-idx1-ubyte[.gz])",
                  "pass a directory with the two MNIST IDX files, or a text file");
    return std::make_unique<MnistDataset>(load_mnist(path), path);
  }
  std::string name = fs::path(path).filename().string();
  if (fs::path(path).extension() == ".bin") {
    if (opts.block_size < 1)
      throw Error("--data " + path + " holds tokens, which need a block size (got " + std::to_string(opts.block_size) +
                      ")",
                  "set the model's block size");
    const int64_t vocab = opts.vocab_size > 0 ? opts.vocab_size : 50257;
    std::optional<TokenFile> val;
    if (!opts.val_path.empty()) val = open_token_file(opts.val_path, vocab);
    return std::make_unique<TokenFileDataset>(open_token_file(path, vocab), std::move(val), vocab, opts.block_size);
  }

  if (name.find("-idx") != std::string::npos && name.find("-ubyte") != std::string::npos)
    throw Error("--data " + path + " is one MNIST IDX file", "pass the directory that holds both IDX files");
  CharText text = load_char_text(path);
  if (text.vocab.contains('\0'))
    throw Error("--data " + path + " holds NUL bytes, so it is not a text file",
                "pass a text file, or a directory with the MNIST IDX files");
  if (opts.block_size < 1)
    throw Error("--data " + path + " is text, which needs a block size (got " + std::to_string(opts.block_size) + ")",
                "set the model's block size");
  if (opts.words) return std::make_unique<WordTextDataset>(load_word_text(path), opts.block_size);
  return std::make_unique<CharTextDataset>(std::move(text), opts.block_size);
}

}  // namespace artel::data
