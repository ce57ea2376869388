#include "artel/optim/sgd.h"

#include <vector>

#include "artel/core/threads.h"

namespace artel::optim {
namespace {

constexpr int64_t kGrain = 1 << 15;  // elements per chunk: below this, threads cost more than they save

std::vector<std::string> sgd_buffers(const SgdOptions& o) {
  if (o.momentum == 0.0f) return {};
  return {"momentum_buffer"};
}

// One chunk. Every scalar is a by-value parameter and every pointer
// __restrict, so the compiler knows no store aliases them and vectorises.
void sgd_chunk(float* __restrict p, const float* __restrict grad, float* __restrict buf, int64_t n, float lr,
               float wd, float mom, float damp, bool nesterov, bool first_step) {
  if (mom == 0.0f) {
    for (int64_t i = 0; i < n; ++i) p[i] -= lr * (grad[i] + wd * p[i]);
  } else if (first_step) {
    const float scale = nesterov ? 1.0f + mom : 1.0f;  // buf = g, so g + mom·buf = (1 + mom)·g
    for (int64_t i = 0; i < n; ++i) {
      float g = grad[i] + wd * p[i];
      buf[i] = g;
      p[i] -= lr * (scale * g);
    }
  } else if (nesterov) {
    for (int64_t i = 0; i < n; ++i) {
      float g = grad[i] + wd * p[i];
      float b = mom * buf[i] + damp * g;
      buf[i] = b;
      p[i] -= lr * (g + mom * b);
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      float g = grad[i] + wd * p[i];
      float b = mom * buf[i] + damp * g;
      buf[i] = b;
      p[i] -= lr * b;
    }
  }
}

}  // namespace

void sgd_update(float* p, const float* grad, float* buf, int64_t n, float lr, float weight_decay,
                const SgdOptions& opt, bool first_step, float grad_scale) {
  const float mom = opt.momentum, damp = 1.0f - opt.dampening;
  const bool nesterov = opt.nesterov;
  parallel_for(n, kGrain, [=](int64_t begin, int64_t end) {
    const float* g = grad + begin;
    std::vector<float> scaled;
    if (grad_scale != 1.0f) {  // the chunk's scaled gradients, rounded before the update reads them (a
      scaled.resize(static_cast<size_t>(end - begin));  // separate loop: no multiply-add fuses the two)
      for (int64_t i = 0; i < end - begin; ++i) scaled[static_cast<size_t>(i)] = g[i] * grad_scale;
      g = scaled.data();
    }
    sgd_chunk(p + begin, g, buf ? buf + begin : nullptr, end - begin, lr, weight_decay, mom, damp, nesterov,
              first_step);
  });
}

Sgd::Sgd(std::vector<ParamGroup> groups, SgdOptions options)
    : Optimizer(std::move(groups), sgd_buffers(options)), options_(options) {
  ARTEL_CHECK(options.momentum >= 0, "SGD: negative momentum ", options.momentum);
  ARTEL_CHECK(options.dampening >= 0 && options.dampening <= 1, "SGD: dampening must be in [0, 1], got ",
              options.dampening);
  ARTEL_CHECK(!options.nesterov || (options.momentum > 0 && options.dampening == 0),
              "SGD: Nesterov momentum needs momentum > 0 and dampening 0");
}

void Sgd::update(Slot& slot, const ParamGroup& group, float* value, const float* grad, float grad_scale, bool first) {
  float* buf = slot.buffers.empty() ? nullptr : slot.buffers[0].data<float>();  // the owned elements only
  sgd_update(value, grad, buf, slot.owned.size(), group.lr, group.weight_decay, options_, first, grad_scale);
}

}  // namespace artel::optim
