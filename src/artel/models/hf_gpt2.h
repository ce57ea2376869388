// Hugging Face's GPT-2 weights (transformers' GPT2Model and GPT2LMHeadModel,
// model.safetensors) to and from the GPT's own (gpt.h, nanoGPT's):
//   names   "h.0.attn.c_attn.weight", "wte.weight", "ln_f.bias", … (GPT2LMHeadModel
//           writes them with "transformer." in front, as the GPT names them)
//           <-> "transformer.h.0.attn.c_attn.weight", …;
//   layout  the Conv1D weights (attn.c_attn, attn.c_proj, mlp.c_fc, mlp.c_proj)
//           are [in, out] there and a Linear's [out, in] here: transposed on
//           the way in and out; every other tensor is the same;
//   extras  the causal-mask buffers older files carry (h.N.attn.bias,
//           h.N.attn.masked_bias) and lm_head.weight (tied to wte) are no
//           parameters: skipped on reading, not written.
// Hugging Face's GPT-2 has 50,257 vocabulary rows, so a model loading it
// takes --vocab-multiple 1.
//
//   if (is_hf_gpt2("model.safetensors")) load_hf_gpt2(gpt, "model.safetensors");
//   write_hf_gpt2(gpt.named_parameters() as tensors, "out/model.safetensors");
#pragma once

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "artel/core/tensor.h"
#include "artel/nn/module.h"
#include "artel/nn/safetensors.h"

namespace artel::models {

// Whether the file is in Hugging Face's layout: a GPT-2 whose first c_attn
// weight and wte are named without "transformer." (GPT2Model's names, which
// no GPT of artel's writes), or with it and [C, 3C]. False for any other file
// (a word model's blocks named h.N, beside its embed.weight), or one that
// cannot be read.
bool is_hf_gpt2(const std::string& path);
bool is_hf_gpt2(const nn::SafetensorsReader& file);

// The GPT's tensor `name` (its own name and layout) from a file in
// Hugging Face's layout. Throws naming the tensor when the file lacks it, or
// when a Conv1D weight is not a 2-D float32 tensor.
Tensor read_hf_gpt2(const nn::SafetensorsReader& file, const std::string& name);

// Throws naming the file and the first few tensors it holds that are none of
// `params` (the GPT's names), nor the causal-mask buffers or lm_head.weight
// (of wte's shape) that Hugging Face's files carry: another block count
// loaded the first blocks and dropped the rest without a word.
void check_hf_gpt2_holds_only(const nn::SafetensorsReader& file, const std::set<std::string>& params);

// Every parameter of `model` (a GPT, declared or not) from such a file.
// Throws naming the file and the first tensor missing or of another shape.
void load_hf_gpt2(nn::Module& model, const std::string& path);

// Every parameter such a file holds, under the GPT's names and in its
// layout (what final.safetensors would hold), in name order.
std::vector<std::pair<std::string, Tensor>> read_all_hf_gpt2(const std::string& path);

// Throws, naming `source` and the tensor, unless `weights` (the GPT's names
// and layout) are exactly a GPT's parameters: every one, of the shapes that
// its embeddings and block count imply, and nothing else.
void check_whole_gpt(const std::vector<std::pair<std::string, Tensor>>& weights, const std::string& source);

// The GPT's weights (its names) as Hugging Face's GPT2Model writes them, to
// `path` (atomically, metadata format "pt").
void write_hf_gpt2(const std::vector<std::pair<std::string, Tensor>>& weights, const std::string& path);

}  // namespace artel::models
