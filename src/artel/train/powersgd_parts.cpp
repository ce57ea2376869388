#include "artel/train/powersgd_parts.h"

namespace artel::train {

std::string powersgd_position(int replicas) { return "powersgd/dp" + std::to_string(replicas) + "."; }

std::string powersgd_position(int dp, int pp, int tp, int stage, const std::string& stage_layers, int tp_rank) {
  return "powersgd/dp" + std::to_string(dp) + ".pp" + std::to_string(pp) + ".tp" + std::to_string(tp) + ".stage" +
         std::to_string(stage) + stage_layers + ".tp" + std::to_string(tp_rank) + ".";
}

void add_powersgd_parts(std::vector<HeldPart>& parts, const parallel::DistributedDataParallel* ddp,
                        const std::string& position, int replica, Tensor& steps, bool reading) {
  steps.data<int64_t>()[0] = reading || !ddp ? -1 : ddp->powersgd_steps();
  if (!ddp) return;
  const std::vector<parallel::DistributedDataParallel::PowerSgdState> state = ddp->powersgd_state();
  if (state.empty()) return;
  auto part = [](std::string key, const Tensor& t) {
    return HeldPart{.key = std::move(key), .dtype = t.dtype(), .whole = t.shape(), .range = {0, t.numel()},
                    .data = t.view({t.numel()})};
  };
  if (reading || replica == 0) {  // one replica writes them, every replica reads them
    parts.push_back(part(position + "steps", steps));
    for (const auto& s : state) parts.push_back(part(position + "q." + s.name, s.q));
  }
  for (const auto& s : state)
    parts.push_back(part(position + "rank" + std::to_string(replica) + ".error." + s.name, s.error));
}

void restore_powersgd_steps(parallel::DistributedDataParallel& ddp, const Tensor& steps) {
  if (const int64_t n = steps.data<int64_t>()[0]; n >= 0) ddp.set_powersgd_steps(n);
}

bool powersgd_restored(const parallel::DistributedDataParallel& ddp, const Tensor& steps) {
  return ddp.powersgd_state().empty() || steps.data<int64_t>()[0] >= 0;
}

}  // namespace artel::train
