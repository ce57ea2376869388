#include "artel/models/hf_gpt2.h"

#include <cstdlib>
#include <cstring>
#include <map>
#include <set>

#include "artel/core/error.h"
#include "artel/kernels/layout.h"
#include "artel/models/model.h"

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

// The GPT ties its head to wte: a file whose lm_head.weight differs is another model.
void check_tied_head(const nn::SafetensorsReader& file, const Tensor& wte) {
  if (!file.contains("lm_head.weight")) return;
  const Tensor head = file.read("lm_head.weight");
  if (head.shape() == wte.shape() && std::memcmp(head.raw(), wte.raw(), wte.nbytes()) != 0)
    throw Error(file.path() + " (Hugging Face's GPT-2 layout): lm_head.weight differs from wte.weight, and the GPT ties "
                "them",
                "pass a GPT-2 whose head is tied to its embedding, as Hugging Face's are");
}

}  // namespace

bool is_hf_gpt2(const nn::SafetensorsReader& file) {
  // GPT2Model's bare names: its blocks and its token table. A block's names
  // alone are not enough: a model of artel's may name its blocks so too
  // (wordlm's h.0.attn.c_attn, next to its own embed.weight).
  if (file.contains("h.0.attn.c_attn.weight") && file.contains("wte.weight"))
    return true;  // a wrong shape is then said by name, as HF's
  if (!file.contains("transformer.h.0.attn.c_attn.weight")) return false;
  const Shape& s = file.shape("transformer.h.0.attn.c_attn.weight");
  return s.size() == 2 && s[1] == 3 * s[0];
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
  if (is_conv1d(name)) {
    const DType dt = file.dtype(found);
    const Shape& shape = file.shape(found);
    if (dt != DType::f32 || shape.size() != 2)
      throw Error(file.path() + " (Hugging Face's GPT-2 layout): " + found + " is " + dtype_name(dt) + " " +
                      shape_str(shape) + ", where a Conv1D weight is a 2-D float32 [in, out] tensor",
                  dt != DType::f32 ? "convert the file to float32 (in PyTorch: {k: v.float() for k, v in ...}, then "
                                     "save_file)"
                                   : "pass a GPT-2 as transformers saves it");
  }
  Tensor t = file.read(found);
  return is_conv1d(name) ? transposed(t) : t;
}

void check_hf_gpt2_holds_only(const nn::SafetensorsReader& file, const std::set<std::string>& params) {
  std::vector<std::string> extra;
  const std::string wte = file.contains("wte.weight") ? "wte.weight" : std::string(kPrefix) + "wte.weight";
  for (const std::string& stored : file.names()) {
    const std::string bare = hf_name(stored);
    const bool mask = bare.ends_with(".attn.bias") || bare.ends_with(".attn.masked_bias");
    const bool head = bare == "lm_head.weight" && file.contains(wte) && file.shape(stored) == file.shape(wte);
    if (!mask && !head && !params.count(kPrefix + bare)) extra.push_back(stored);
  }
  if (extra.empty()) return;
  const std::string listed = name_list(extra, 3);
  throw Error(file.path() + " (Hugging Face's GPT-2 layout) holds " + listed + ", which the model has not",
              "pass a GPT-2 of the model's shape (--n-layer, --n-embd, --n-head, --vocab-size)");
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
    if (bare == "wte.weight") check_tied_head(file, out.back().second);
  }
  return out;
}

void load_hf_gpt2(nn::Module& model, const std::string& path) {
  const nn::SafetensorsReader file(path);
  nn::StateDict state;
  std::set<std::string> params;
  for (const nn::DeclaredParameter& p : model.declared_parameters()) params.insert(p.name);
  check_hf_gpt2_holds_only(file, params);
  for (const nn::DeclaredParameter& p : model.declared_parameters()) state[p.name] = read_hf_gpt2(file, p.name);
  if (state.count("transformer.wte.weight")) check_tied_head(file, state.at("transformer.wte.weight"));
  try {
    model.load_state_dict(state, /*strict=*/true);
  } catch (const Error& e) {
    throw Error(path + " (Hugging Face's GPT-2 layout): " + e.what(),
                "Hugging Face's GPT-2 has 50,257 vocabulary rows: train it with --vocab-multiple 1 and the "
                "shape it was saved with");
  }
}

void check_whole_gpt(const std::vector<std::pair<std::string, Tensor>>& weights, const std::string& source) {
  std::map<std::string, Shape> have;
  std::set<int64_t> blocks;
  for (const auto& [name, t] : weights) {
    have[name] = t.shape();
    const std::string h = std::string(kPrefix) + "h.";
    if (name.compare(0, h.size(), h) == 0) blocks.insert(std::atoll(name.c_str() + h.size()));
  }
  const auto wte = have.find(std::string(kPrefix) + "wte.weight"), wpe = have.find(std::string(kPrefix) + "wpe.weight");
  if (wte == have.end() || wpe == have.end() || wte->second.size() != 2 || wpe->second.size() != 2)
    throw Error(source + " holds no GPT (no 2-D transformer.wte.weight and transformer.wpe.weight)",
                "pass a GPT's weights");
  ModelConfig c;
  c.vocab_size = wte->second[0];
  c.n_embd = wte->second[1];
  c.block_size = wpe->second[0];
  c.n_layer = static_cast<int64_t>(blocks.size());
  c.n_head = 1;  // heads leave every shape alone
  if (c.n_layer == 0) throw Error(source + " holds a GPT without blocks (no transformer.h.0.*)", "pass a GPT's weights");
  const std::unique_ptr<Model> gpt = declare_model(c);
  const std::string shape = detail::concat("a GPT of ", c.n_layer, c.n_layer == 1 ? " block, " : " blocks, ", c.n_embd, " wide, ", c.vocab_size,
                                           " tokens and ", c.block_size, " positions");
  std::set<std::string> expected;
  for (const nn::DeclaredParameter& p : gpt->declared_parameters()) {
    expected.insert(p.name);
    const auto it = have.find(p.name);
    if (it == have.end()) throw Error(source + " lacks " + p.name + " of " + shape, "pass a whole GPT's weights");
    if (it->second != p.shape)
      throw Error(source + ": " + p.name + " is " + shape_str(it->second) + ", where " + shape + " has " +
                      shape_str(p.shape),
                  "pass a whole GPT's weights");
  }
  // nanoGPT's state dicts carry the head tied to wte under its own name too.
  if (have.count("lm_head.weight") && have.at("lm_head.weight") == wte->second) expected.insert("lm_head.weight");
  for (const auto& [name, s] : have)
    if (!expected.count(name)) throw Error(source + " holds " + name + ", which " + shape + " has not", "pass a GPT's weights alone");
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
