#include "artel/nn/module.h"

#include <cstring>
#include <set>

#include <nlohmann/json.hpp>

namespace artel::nn {
namespace {

bool same_values(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

}  // namespace

void Module::check_new_name(const std::string& name) const {
  ARTEL_CHECK(!name.empty() && name.find('.') == std::string::npos,
              "module member name '", name, "' must be non-empty and contain no '.'");
  // Names are keys of JSON headers (safetensors, checkpoints): invalid UTF-8
  // failed there, after training, as a JSON library's exception; a NUL cut
  // the name short in C strings.
  bool utf8 = true;
  try {
    (void)nlohmann::json(name).dump();
  } catch (const nlohmann::json::type_error&) {
    utf8 = false;
  }
  ARTEL_CHECK(utf8 && name.find('\0') == std::string::npos, "module member name ",
              nlohmann::json(name).dump(-1, ' ', /*ensure_ascii=*/true, nlohmann::json::error_handler_t::replace),
              " is not UTF-8 text without NUL (weights files and checkpoints keep names as JSON)");
  for (const auto& [n, _] : params_) ARTEL_CHECK(n != name, "parameter '", name, "' registered twice");
  for (const auto& [n, _] : buffers_) ARTEL_CHECK(n != name, "buffer '", name, "' registered twice");
  for (const auto& [n, _] : children_) ARTEL_CHECK(n != name, "submodule '", name, "' registered twice");
}

Variable Module::register_parameter(const std::string& name, Tensor value, bool requires_grad) {
  check_new_name(name);
  Variable v(std::move(value), requires_grad);
  declared_.emplace_back(v.value().shape(), std::nullopt);
  params_.emplace_back(name, v);
  return v;
}

Variable Module::declare_parameter(const std::string& name, Shape shape, Init init) {
  check_new_name(name);
  for (int64_t d : shape) ARTEL_CHECK(d > 0, "parameter '", name, "': shape ", shape_str(shape), " is not positive");
  Variable v(Tensor(), /*requires_grad=*/true);
  declared_.emplace_back(std::move(shape), init);
  params_.emplace_back(name, v);
  return v;
}

Tensor Module::register_buffer(const std::string& name, Tensor value) {
  check_new_name(name);
  buffers_.emplace_back(name, value);
  return value;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> module) {
  ARTEL_CHECK(module != nullptr, "register_module('", name, "'): null module");
  check_new_name(name);
  for (const auto& [other, m] : children_)
    ARTEL_CHECK(m != module, "register_module('", name, "'): this module is registered already as '", other,
                "', and its parameters would be trained twice (hint: to share its weights, register_alias the "
                "parameters' names)");
  module->train(training_);
  children_.emplace_back(name, std::move(module));
}

void Module::register_alias(const std::string& alias, const std::string& target) {
  aliases_.emplace_back(alias, target);
}

void Module::collect_parameters(const std::string& prefix, NamedParameters& out) const {
  for (const auto& [n, v] : params_) out.emplace_back(prefix + n, v);
  for (const auto& [n, m] : children_) m->collect_parameters(prefix + n + ".", out);
}

void Module::collect_declared(const std::string& prefix, std::vector<DeclaredParameter>& out) const {
  for (size_t i = 0; i < params_.size(); ++i)
    out.push_back({prefix + params_[i].first, params_[i].second, declared_[i].first, declared_[i].second});
  for (const auto& [n, m] : children_) m->collect_declared(prefix + n + ".", out);
}

void Module::collect_modules(const std::string& prefix, std::vector<std::pair<std::string, Module*>>& out) {
  out.emplace_back(prefix, this);
  for (const auto& [n, m] : children_) m->collect_modules(prefix.empty() ? n : prefix + "." + n, out);
}

std::vector<DeclaredParameter> Module::declared_parameters() const {
  std::vector<DeclaredParameter> out;
  collect_declared("", out);
  return out;
}

std::vector<std::pair<std::string, Module*>> Module::named_modules() {
  std::vector<std::pair<std::string, Module*>> out;
  collect_modules("", out);
  return out;
}

void Module::collect_buffers(const std::string& prefix, std::vector<std::pair<std::string, Tensor>>& out) const {
  for (const auto& [n, t] : buffers_) out.emplace_back(prefix + n, t);
  for (const auto& [n, m] : children_) m->collect_buffers(prefix + n + ".", out);
}

void Module::collect_aliases(const std::string& prefix, std::map<std::string, std::string>& out) const {
  for (const auto& [a, t] : aliases_) out[prefix + a] = prefix + t;
  for (const auto& [n, m] : children_) m->collect_aliases(prefix + n + ".", out);
}

NamedParameters Module::named_parameters() const {
  NamedParameters out;
  collect_parameters("", out);
  return out;
}

std::vector<Variable> Module::parameters() const {
  std::vector<Variable> out;
  for (auto& [_, v] : named_parameters()) out.push_back(v);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers() const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect_buffers("", out);
  return out;
}

std::map<std::string, std::string> Module::aliases() const {
  std::map<std::string, std::string> out;
  collect_aliases("", out);
  if (out.empty()) return out;
  // Checked here, not at registration: a target may be registered after its
  // alias (in a child added later).
  std::set<std::string> tensors;
  for (const auto& [n, _] : named_parameters()) tensors.insert(n);
  for (const auto& [n, _] : named_buffers()) tensors.insert(n);
  for (const auto& [alias, target] : out) {
    if (!tensors.contains(target))
      throw Error("alias '" + alias + "' names '" + target + "', which is no parameter or buffer of the model",
                  "register_alias a parameter's full name relative to the module that registers it");
    if (tensors.contains(alias))
      throw Error("alias '" + alias + "' is also the name of a parameter or buffer", "give the alias a name of its own");
  }
  return out;
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (const DeclaredParameter& d : declared_parameters()) n += shape_numel(d.shape);
  return n;
}

void materialize(Module& module, uint64_t seed) {
  for (DeclaredParameter& d : module.declared_parameters()) {
    if (d.param.value().defined() || !d.init) continue;
    Tensor t = Tensor::empty(d.shape);
    fill(t, *d.init, seed, stream_of(d.name), d.shape);
    d.param.value() = t;
  }
}

StateDict Module::state_dict() const {
  StateDict out;
  for (const auto& [n, v] : named_parameters())
    if (v.value().defined()) out[n] = v.value();  // a declared parameter not materialised here has no value
  for (const auto& [n, t] : named_buffers()) out[n] = t;
  return out;
}

void Module::load_state_dict(const StateDict& state, bool strict) {
  // A declared parameter without storage gets it here, whole (Note [Declared parameters]).
  struct Target {
    std::string name;
    Tensor* value;
    Shape shape;
  };
  std::vector<DeclaredParameter> declared = declared_parameters();
  std::vector<std::pair<std::string, Tensor>> buffers = named_buffers();
  std::vector<Target> targets;
  for (DeclaredParameter& d : declared) targets.push_back({d.name, &d.param.value(), d.shape});
  for (auto& [n, t] : buffers) targets.push_back({n, &t, t.shape()});
  std::map<std::string, std::string> alias = aliases();

  std::map<std::string, const Tensor*> given;
  for (const auto& [n, t] : state) given[n] = &t;
  std::vector<std::string> unexpected, mismatched, missing;
  for (const auto& [a, target] : alias) {
    auto it = given.find(a);
    if (it == given.end()) continue;
    auto t = given.find(target);
    if (t == given.end()) {
      given[target] = it->second;
    } else if (!same_values(*t->second, *it->second)) {
      mismatched.push_back(a + " (tied to " + target + " but holds different values)");
    }
    given.erase(a);
  }
  std::set<std::string> known;
  for (const Target& t : targets) {
    const std::string& n = t.name;
    known.insert(n);
    auto it = given.find(n);
    if (it == given.end()) {
      missing.push_back(n);
    } else if (it->second->shape() != t.shape || it->second->dtype() != t.value->dtype()) {
      mismatched.push_back(n + " (given " + dtype_name(it->second->dtype()) + " " + shape_str(it->second->shape()) +
                           ", model has " + dtype_name(t.value->dtype()) + " " + shape_str(t.shape) + ")");
    }
  }
  for (const auto& [n, _] : given)
    if (!known.count(n)) unexpected.push_back(n);

  std::string problems;
  if (strict && !missing.empty()) problems += "missing " + name_list(missing) + "; ";
  if (strict && !unexpected.empty()) problems += "unexpected " + name_list(unexpected) + "; ";
  if (!mismatched.empty()) problems += "wrong shape or dtype: " + name_list(mismatched) + "; ";
  if (!problems.empty())
    throw Error("load_state_dict: " + problems.substr(0, problems.size() - 2),
                "the weights were saved from a different model or configuration; check the model kind and sizes");
  for (const Target& t : targets) {
    auto it = given.find(t.name);
    if (it == given.end()) continue;
    if (!t.value->defined()) *t.value = Tensor::empty(t.shape, it->second->dtype());
    if (it->second->raw() != t.value->raw()) t.value->copy_from(*it->second);
  }
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [_, m] : children_) m->train(on);
}

void Module::zero_grad() {
  for (auto& [_, v] : named_parameters()) v.zero_grad();
}

}  // namespace artel::nn
