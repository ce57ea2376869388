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
#include <string>

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

// A module's state dict to / from a file. Errors name the file and the tensor.
void save_weights(const Module& module, const std::string& path,
                  const std::map<std::string, std::string>& metadata = {});
void load_weights(Module& module, const std::string& path, bool strict = true);

}  // namespace artel::nn
