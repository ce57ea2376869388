#include "artel/nn/activations.h"

#include "artel/core/error.h"

namespace artel::nn {

Gelu parse_gelu(const std::string& name) {
  if (name == "exact") return Gelu::exact;
  if (name == "tanh") return Gelu::tanh;
  throw Error("unknown gelu '" + name + "'", "use exact (nanoGPT's, PyTorch's default) or tanh (GPT-2's gelu_new)");
}

}  // namespace artel::nn
