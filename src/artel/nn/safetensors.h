// safetensors files: how artel writes and reads weights, so that PyTorch
// (safetensors.torch.load_file) and artel read each other's files.
//
// Layout: an 8-byte little-endian header length N, N bytes of JSON
//   {"name": {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}, ...,
//    "__metadata__": {"key": "value"}}
// padded with spaces so the data starts 8-byte aligned, then the data; offsets
// are relative to the first byte after the header. Reading validates all of
// it (sizes, JSON, dtypes, offsets that must tile the data exactly) and names
// the file and the problem; writing is atomic (temp file, fsync, rename).
//
// Tied weights (Module aliases, e.g. GPT's lm_head.weight = transformer.wte.weight)
// are written once under the parameter's name; PyTorch's save_file refuses
// shared storage anyway. Loading accepts the alias as well (see Module::load_state_dict).
//
//   nn::save_weights(model, "out/final.safetensors");
//   nn::load_weights(model, "init.safetensors");      // errors name missing / unexpected / mis-shaped tensors
#pragma once

#include <map>
#include <set>
#include <string>
#include <utility>

#include "artel/core/tensor.h"
#include "artel/nn/module.h"

namespace artel::nn {

struct SafetensorsFile {
  std::map<std::string, Tensor> tensors;
  std::map<std::string, std::string> metadata;
};

// Supported dtypes: F32, F64, I32, I64, BF16.
void write_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});
SafetensorsFile read_safetensors(const std::string& path);

// The bytes of a file (header + data), for writers that place them elsewhere.
std::string encode_safetensors(const std::map<std::string, Tensor>& tensors,
                               const std::map<std::string, std::string>& metadata = {});
// Parses bytes as read_safetensors would; `source` names them in errors.
SafetensorsFile decode_safetensors(const std::string& bytes, const std::string& source);

// A file written one tensor at a time, for a model no worker holds whole:
// the header goes first (names, dtypes, shapes), each tensor's bytes when it
// comes, and commit() makes the file appear atomically, complete. Destroyed
// uncommitted (an error on the way), it leaves nothing behind.
//
//   SafetensorsWriter w(path, {{"a", {DType::f32, {2, 3}}}, {"b", {DType::f32, {4}}}});
//   w.write("b", b);  w.write("a", a);  w.commit();
class SafetensorsWriter {
 public:
  SafetensorsWriter(std::string path, const std::map<std::string, std::pair<DType, Shape>>& layout,
                    const std::map<std::string, std::string>& metadata = {});
  ~SafetensorsWriter();
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;
  void write(const std::string& name, const Tensor& t);
  void commit();  // throws naming a tensor never written

 private:
  void abandon();
  std::string path_, tmp_;
  std::map<std::string, std::pair<DType, Shape>> layout_;
  std::map<std::string, uint64_t> offsets_;
  std::set<std::string> written_;
  uint64_t data_start_ = 0;
  int fd_ = -1;
};

// A file's tensors read one at a time (the header checked whole first), so
// a worker taking its shard from a weights file never holds all of it.
//
//   SafetensorsReader r("init.safetensors");
//   if (r.contains("fc.weight")) Tensor w = r.read("fc.weight");
class SafetensorsReader {
 public:
  explicit SafetensorsReader(std::string path);
  ~SafetensorsReader();
  SafetensorsReader(const SafetensorsReader&) = delete;
  SafetensorsReader& operator=(const SafetensorsReader&) = delete;
  bool contains(const std::string& name) const { return entries_.count(name) > 0; }
  const Shape& shape(const std::string& name) const;  // throws naming a tensor the file lacks
  DType dtype(const std::string& name) const;         // likewise
  std::vector<std::string> names() const;            // every tensor's, sorted
  Tensor read(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::string& path() const { return path_; }

 private:
  struct Entry {
    DType dtype;
    Shape shape;
    uint64_t begin, end;
  };
  std::string path_;
  int fd_ = -1;
  uint64_t data_start_ = 0;
  std::map<std::string, Entry> entries_;
  std::map<std::string, std::string> metadata_;
};

// A module's state dict to / from a file. Errors name the file and the tensor.
void save_weights(const Module& module, const std::string& path,
                  const std::map<std::string, std::string>& metadata = {});
void load_weights(Module& module, const std::string& path, bool strict = true);

}  // namespace artel::nn
