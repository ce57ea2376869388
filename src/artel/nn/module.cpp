#include "artel/nn/module.h"

#include <cstring>
#include <set>
#include <sstream>

namespace artel::nn {
namespace {

// "a, b, c and 4 more": keeps an error about a whole model on one line.
std::string name_list(const std::vector<std::string>& names) {
  constexpr size_t kShown = 8;
  std::ostringstream os;
  for (size_t i = 0; i < names.size() && i < kShown; ++i) os << (i ? ", " : "") << names[i];
  if (names.size() > kShown) os << " and " << names.size() - kShown << " more";
  return os.str();
}

bool same_values(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

}  // namespace

void Module::check_new_name(const std::string& name) const {
  ARTEL_CHECK(!name.empty() && name.find('.') == std::string::npos,
              "module member name '", name, "' must be non-empty and contain no '.'");
  for (const auto& [n, _] : params_) ARTEL_CHECK(n != name, "parameter '", name, "' registered twice");
  for (const auto& [n, _] : buffers_) ARTEL_CHECK(n != name, "buffer '", name, "' registered twice");
  for (const auto& [n, _] : children_) ARTEL_CHECK(n != name, "submodule '", name, "' registered twice");
}

Variable Module::register_parameter(const std::string& name, Tensor value, bool requires_grad) {
  check_new_name(name);
  Variable v(std::move(value), requires_grad);
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
  return out;
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (const auto& [_, v] : named_parameters()) n += v.numel();
  return n;
}

StateDict Module::state_dict() const {
  StateDict out;
  for (const auto& [n, v] : named_parameters()) out[n] = v.value();
  for (const auto& [n, t] : named_buffers()) out[n] = t;
  return out;
}

void Module::load_state_dict(const StateDict& state, bool strict) {
  std::vector<std::pair<std::string, Tensor>> targets;
  for (const auto& [n, v] : named_parameters()) targets.emplace_back(n, v.value());
  for (const auto& [n, t] : named_buffers()) targets.emplace_back(n, t);
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
  for (auto& [n, dst] : targets) {
    known.insert(n);
    auto it = given.find(n);
    if (it == given.end()) {
      missing.push_back(n);
    } else if (it->second->shape() != dst.shape() || it->second->dtype() != dst.dtype()) {
      mismatched.push_back(n + " (given " + dtype_name(it->second->dtype()) + " " + shape_str(it->second->shape()) +
                           ", model has " + dtype_name(dst.dtype()) + " " + shape_str(dst.shape()) + ")");
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
  for (auto& [n, dst] : targets) {
    auto it = given.find(n);
    if (it != given.end() && it->second->raw() != dst.raw()) dst.copy_from(*it->second);
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
