// Embedding: a (num_embeddings, dim) table looked up by integer ids. Starts
// N(0, 1), as PyTorch's does, unless the model says otherwise.
//
// attend(x) = x·Wᵀ uses the table as an output layer (a language model's
// head tied to its token embedding: logits over the table's rows).
//
// Split over a tensor-parallel group by a model's plan (vocabulary-parallel,
// Megatron's), each rank holds rows [first_row, first_row + rows) of the
// (possibly padded) table: a lookup gives zeros for the ids of other ranks
// and `reduce` sums the ranks' rows; attend gives this rank's logits only.
//
// A sparse table (PyTorch's nn.Embedding(sparse=True), set_sparse) is one a
// batch reads a few rows of: a parameter server's workers pull and push only
// those rows (train/parameter_server.h), fetched by the hook the worker sets
// with before_lookup. Its gradient is dense here all the same (zeros but the
// rows looked up).
//
//   Embedding wte(vocab, C, Init::normal(0.0f, 0.02f));
//   Variable x = wte.forward(ids);     // ids (B, T) int64 -> (B, T, C)
//   Variable logits = wte.attend(h);   // (B, T, C) -> (B, T, vocab)
#pragma once

#include <functional>

#include "artel/nn/init.h"
#include "artel/nn/module.h"

namespace artel::nn {

// What a vocabulary-parallel plan adds to an Embedding (set by parallel/).
struct EmbeddingParallel {
  int64_t first_row = 0;  // this rank's first row of the whole table
  std::function<Variable(const Variable&)> enter;   // attend: on the replicated input (Megatron's f)
  std::function<Variable(const Variable&)> reduce;  // forward: sums the ranks' looked-up rows (Megatron's g)
};

class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t dim, Init init = Init::normal(0.0f, 1.0f));
  Variable forward(const Tensor& ids);
  Variable attend(const Variable& x);

  const Variable& weight() const { return weight_; }
  int64_t num_embeddings() const { return rows_; }  // of the whole table, without padding
  int64_t dim() const { return dim_; }
  void set_parallel(EmbeddingParallel p) { parallel_ = std::move(p); }
  void set_sparse(bool on) { sparse_ = on; }
  bool sparse() const { return sparse_; }
  // Called with the ids of every lookup before it reads the table (null: none).
  void before_lookup(std::function<void(const Tensor& ids)> fn) { before_lookup_ = std::move(fn); }
  const EmbeddingParallel& parallel() const { return parallel_; }

 private:
  int64_t rows_, dim_;
  Variable weight_;
  EmbeddingParallel parallel_;
  bool sparse_ = false;
  std::function<void(const Tensor& ids)> before_lookup_;
};

}  // namespace artel::nn
