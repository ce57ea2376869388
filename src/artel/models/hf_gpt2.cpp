#include "artel/models/hf_gpt2.h"

#include <map>

#include "artel/core/error.h"
#include "artel/kernels/layout.h"

namespace artel::models {

namespace {

constexpr const char* kPrefix = "transformer.";

bool is_conv1d(const std::string& name) {
  for (const char* layer : {".attn.c_attn.weight", ".attn.c_proj.weight", ".mlp.c_fc.weight", ".mlp.c_proj.weight"}) {
    const std::string l = layer;
    if (name.size() >= l.size() && name.compare(name.size() - l.size(), l.size(), l) == 0) return true;
  }
  return false;
}

// "transformer.h.0.ln_1.weight" -> "h.0.ln_1.weight"
std::string hf_name(const std::string& name) {
  const std::string p = kPrefix;
  return name.compare(0, p.size(), p) == 0 ? name.substr(p.size()) : name;
}

Tensor transposed(const Tensor& t) {
  ARTEL_CHECK(t.dim() == 2 && t.dtype() == DType::f32, "a Conv1D weight must be a 2-D float32 tensor, got ",
              shape_str(t.shape()));
  Tensor out = Tensor::empty({t.size(1), t.size(0)});
  kernels::transpose(1, t.size(0), 1, t.size(1), 1, t.data<float>(), out.data<float>());
  return out;
}

}  // namespace

bool is_hf_gpt2(const nn::SafetensorsReader& file) {
  for (const std::string name : {"h.0.attn.c_attn.weight", "transformer.h.0.attn.c_attn.weight"})
    if (file.contains(name)) {
      const Shape& s = file.shape(name);
      return s.size() == 2 && s[1] == 3 * s[0];
    }
  return false;
}

bool is_hf_gpt2(const std::string& path) {
  try {
    return is_hf_gpt2(nn::SafetensorsReader(path));
  } catch (const Error&) {
    return false;  // whoever reads it next says what is wrong
  }
}

Tensor read_hf_gpt2(const nn::SafetensorsReader& file, const std::string& name) {
  const std::string bare = hf_name(name);
  const std::string found = file.contains(bare) ? bare : kPrefix + bare;
  if (!file.contains(found))
    throw Error(file.path() + " (Hugging Face's GPT-2 layout) has no tensor " + bare + " for " + name,
                "pass a GPT-2 of the model's shape");
  Tensor t = file.read(found);
  return is_conv1d(name) ? transposed(t) : t;
}

std::vector<std::pair<std::string, Tensor>> read_all_hf_gpt2(const std::string& path) {
  const nn::SafetensorsReader file(path);
  ARTEL_CHECK(is_hf_gpt2(file), path, " is not a GPT-2 in Hugging Face's layout (no [C, 3C] h.0.attn.c_attn.weight)");
  std::vector<std::pair<std::string, Tensor>> out;
  for (const std::string& stored : file.names()) {
    const std::string bare = hf_name(stored);
    const bool mask = bare.size() > 10 && (bare.ends_with(".attn.bias") || bare.ends_with(".attn.masked_bias"));
    if (mask || bare == "lm_head.weight") continue;  // buffers, and the tied head
    out.emplace_back(kPrefix + bare, read_hf_gpt2(file, kPrefix + bare));
  }
  return out;
}

void load_hf_gpt2(nn::Module& model, const std::string& path) {
  const nn::SafetensorsReader file(path);
  nn::StateDict state;
  for (const nn::DeclaredParameter& p : model.declared_parameters()) state[p.name] = read_hf_gpt2(file, p.name);
  try {
    model.load_state_dict(state, /*strict=*/true);
  } catch (const Error& e) {
    throw Error(path + " (Hugging Face's GPT-2 layout): " + e.what(),
                "Hugging Face's GPT-2 has 50,257 vocabulary rows: train it with --vocab-multiple 1 and the "
                "shape it was saved with");
  }
}

void write_hf_gpt2(const std::vector<std::pair<std::string, Tensor>>& weights, const std::string& path) {
  std::map<std::string, std::pair<DType, Shape>> layout;
  std::map<std::string, Tensor> out;
  for (const auto& [name, t] : weights) {
    Tensor w = is_conv1d(name) ? transposed(t) : t;
    layout[hf_name(name)] = {w.dtype(), w.shape()};
    out[hf_name(name)] = w;
  }
  nn::SafetensorsWriter file(path, layout, {{"format", "pt"}});
  for (const auto& [name, t] : out) file.write(name, t);
  file.commit();
}

}  // namespace artel::models
