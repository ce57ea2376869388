// Datasets as pure functions of the step: given the sampler (order, seed,
// batch sizes, rank) and the global step k, a dataset builds this rank's
// batch. Nothing else is remembered, so resuming at step k is exact.
//
//   MNIST:      x (B, 784) f32, y (B) int64. A draw is a sample:
//               sequential row j reads sample j mod n_train; shuffle reads the
//               permuted sample (sampler.h, Note [Batch order]).
//   Text:       x (B, T) int64 inputs, y (B, T) int64 targets: a row is the T+1
//               tokens (characters, or words: word_text.h) of the train split
//               from `start`; x the first T, y the last T. Items are the R = (n_train − 1)/T blocks starting at
//               i·T: shuffle reads start = perm_e[p]·T; sequential row j reads
//               start = (j·T) mod (n_train − T).
//
// Validation is the whole split, in order, in batches of B (the last one may be
// shorter): MNIST every sample; text the non-overlapping rows start = i·T for
// i in [0, (n_val − 1)/T).
//
//   auto ds = open_dataset("data/tinyshakespeare.txt", {.block_size = 64});
//   DistributedSampler s = make_sampler(*ds, {.seed = 1, .rank_batch = 8, .world_size = 2, .rank = r});
//   Batch b = ds->train_batch(s, k);  // b.x: (8, 64)
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "artel/core/tensor.h"
#include "artel/data/char_text.h"
#include "artel/data/mnist.h"
#include "artel/data/sampler.h"
#include "artel/data/token_file.h"
#include "artel/data/token_split.h"
#include "artel/data/word_text.h"

namespace artel::data {

// text: token blocks (a batch's items are tokens); the others are rows with a
// class each (items are samples); `other` is a dataset of the user's own.
enum class DatasetKind { mnist, text, other };

struct Batch {
  Tensor x;  // inputs
  Tensor y;  // labels / targets
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual DatasetKind kind() const = 0;
  virtual std::string describe() const = 0;  // one line, for logs
  // Classes to predict: 10 for MNIST, the vocabulary size for text.
  virtual int64_t num_classes() const = 0;
  // What the sampler permutes: MNIST train samples, or text blocks R.
  virtual int64_t num_train_items() const = 0;
  // This rank's batch of global step k (sampler built over num_train_items()).
  virtual Batch train_batch(const DistributedSampler& sampler, int64_t k) const = 0;
  virtual int64_t num_val_batches(int64_t batch) const = 0;
  virtual Batch val_batch(int64_t batch, int64_t i) const = 0;  // i in [0, num_val_batches)
};

// A sampler over the dataset's train items.
DistributedSampler make_sampler(const Dataset& ds, SamplerConfig cfg);

// Rows a program already holds, as PyTorch's TensorDataset: x (N, D) float32
// inputs and y (N) int64 classes in [0, classes), a train and a validation
// split. A batch is rows of x and their classes; a user's own data comes in
// this way (kind `other`), and MNIST is one.
//
//   auto ds = std::make_unique<TensorDataset>(train_x, train_y, val_x, val_y, /*classes=*/2, "spirals");
class TensorDataset : public Dataset {
 public:
  // Throws naming the tensor whose shape or dtype does not fit.
  TensorDataset(Tensor train_x, Tensor train_y, Tensor val_x, Tensor val_y, int64_t classes, std::string description,
                DatasetKind kind = DatasetKind::other);
  DatasetKind kind() const override { return kind_; }
  std::string describe() const override { return description_; }
  int64_t num_classes() const override { return classes_; }
  int64_t num_train_items() const override { return train_x_.size(0); }
  Batch train_batch(const DistributedSampler& sampler, int64_t k) const override;
  int64_t num_val_batches(int64_t batch) const override;
  Batch val_batch(int64_t batch, int64_t i) const override;

 private:
  Tensor train_x_, train_y_, val_x_, val_y_;
  int64_t classes_;
  std::string description_;
  DatasetKind kind_;
};

class MnistDataset : public TensorDataset {
 public:
  explicit MnistDataset(MnistData data, std::string source = "mnist");
  const MnistData& data() const { return data_; }

 private:
  MnistData data_;
};

// Blocks of T+1 tokens of a text's splits (the header comment): characters
// (CharTextDataset) or words (WordTextDataset).
class TextDataset : public Dataset {
 public:
  DatasetKind kind() const override { return DatasetKind::text; }
  std::string describe() const override;
  int64_t num_classes() const override { return vocab_size_; }
  int64_t num_train_items() const override { return (train_.size() - 1) / block_; }
  Batch train_batch(const DistributedSampler& sampler, int64_t k) const override;
  int64_t num_val_batches(int64_t batch) const override;
  Batch val_batch(int64_t batch, int64_t i) const override;
  int64_t block_size() const { return block_; }
  const std::string& unit() const { return unit_; }  // "characters" | "words" | "tokens"
  // Start of the train row a draw reads (see the header comment).
  int64_t row_start(Order order, int64_t draw) const;
  // Token ids as text, and the token a generated sample starts from.
  virtual std::string decode(std::span<const int64_t> ids) const = 0;
  virtual int64_t first_token() const = 0;

 protected:
  // Throws when either split is shorter than one block of T+1 tokens.
  TextDataset(std::string path, std::string unit, int64_t vocab_size, TokenSplit train, TokenSplit val,
              int64_t block_size);

 private:
  std::string source_kind() const;  // "char text" | "word text" | "token file", for messages
  std::string path_, unit_;  // unit: "characters" | "words" | "tokens"
  int64_t vocab_size_;
  TokenSplit train_, val_;
  int64_t block_;
};

class CharTextDataset : public TextDataset {
 public:
  CharTextDataset(CharText text, int64_t block_size);
  const CharVocab& vocab() const { return text_.vocab; }
  const CharText& text() const { return text_; }
  std::string decode(std::span<const int64_t> ids) const override { return text_.vocab.decode(ids); }
  int64_t first_token() const override { return text_.vocab.contains('\n') ? text_.vocab.id('\n') : 0; }

 private:
  CharText text_;
};

class WordTextDataset : public TextDataset {
 public:
  WordTextDataset(WordText text, int64_t block_size);
  const WordVocab& vocab() const { return vocab_; }
  std::string decode(std::span<const int64_t> ids) const override { return vocab_.decode(ids); }
  int64_t first_token() const override { return 0; }

 private:
  WordVocab vocab_;
};

// Token files (token_file.h): `train` trains, `val` validates; without one,
// the last 10% of train's tokens (from int(0.9·n)) validate, as for text.
// Ids print as numbers (decode); a sample starts from GPT-2's <|endoftext|>
// (50256) when the vocabulary has it.
class TokenFileDataset : public TextDataset {
 public:
  TokenFileDataset(TokenFile train, std::optional<TokenFile> val, int64_t vocab_size, int64_t block_size);
  std::string decode(std::span<const int64_t> ids) const override;
  int64_t first_token() const override { return num_classes() > 50256 ? 50256 : 0; }
};

struct DatasetOptions {
  int64_t block_size = 0;  // T, required for text
  bool words = false;      // a text file as words (WordTextDataset), not characters
  // Token files (*.bin) only: the validation file ("" = the last 10% of
  // --data) and the vocabulary the ids must fall in (0 = GPT-2's 50,257).
  std::string val_path;
  int64_t vocab_size = 0;
};

// `path` a directory with the MNIST IDX files -> MnistDataset; a *.bin file ->
// TokenFileDataset; a text file -> CharTextDataset (WordTextDataset with opts.words). Anything else throws an artel::Error saying why.
std::unique_ptr<Dataset> open_dataset(const std::string& path, const DatasetOptions& opts = {});

}  // namespace artel::data
