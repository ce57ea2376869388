#include "artel/train/powersgd_parts.h"

#include <map>

#include "artel/core/error.h"

namespace artel::train {

std::string powersgd_position(int replicas) { return "powersgd/dp" + std::to_string(replicas) + "."; }

std::string powersgd_position(int dp, int pp, int tp, int stage, const std::string& stage_layers, int tp_rank) {
  return "powersgd/dp" + std::to_string(dp) + ".pp" + std::to_string(pp) + ".tp" + std::to_string(tp) + ".stage" +
         std::to_string(stage) + stage_layers + ".tp" + std::to_string(tp_rank) + ".";
}

void add_powersgd_parts(std::vector<HeldPart>& parts, const parallel::DistributedDataParallel* ddp,
                        const std::string& position, int replica, bool reading) {
  if (!ddp) return;
  const std::vector<parallel::DistributedDataParallel::PowerSgdState> state = ddp->powersgd_state();
  if (state.empty()) return;
  auto part = [&](std::string key, const Tensor& t) {
    return HeldPart{.key = std::move(key), .dtype = t.dtype(), .whole = t.shape(), .range = {0, t.numel()},
                    .data = reading ? Tensor::empty({t.numel()}, t.dtype()) : t.view({t.numel()}),
                    .absent_if_different = true};
  };
  if (reading || replica == 0) {  // one replica writes them, every replica reads them
    Tensor steps = Tensor::empty({}, DType::i64);
    steps.data<int64_t>()[0] = ddp->powersgd_steps();
    parts.push_back(part(position + "steps", steps));
    for (const auto& s : state) parts.push_back(part(position + "q." + s.name, s.q));
  }
  for (const auto& s : state)
    parts.push_back(part(position + "rank" + std::to_string(replica) + ".error." + s.name, s.error));
}

bool restore_powersgd(parallel::DistributedDataParallel* ddp, const std::string& position, int replica,
                      const std::vector<HeldPart>& wanted, const std::vector<bool>& found) {
  if (!ddp) return true;
  const std::vector<parallel::DistributedDataParallel::PowerSgdState> state = ddp->powersgd_state();
  if (state.empty()) return true;
  std::map<std::string, const Tensor*> read;  // the position's parts, by key
  for (size_t i = 0; i < wanted.size(); ++i) {
    if (wanted[i].key.compare(0, position.size(), position) != 0) continue;
    if (!found[i]) return false;
    read[wanted[i].key] = &wanted[i].data;
  }
  auto of = [&](const std::string& key) -> const Tensor& {
    auto it = read.find(key);
    ARTEL_CHECK(it != read.end(), "PowerSGD's ", key, " was not among the checkpoint parts read");
    return *it->second;
  };
  for (const auto& s : state) {
    s.q.view({s.q.numel()}).copy_from(of(position + "q." + s.name));
    s.error.view({s.error.numel()}).copy_from(of(position + "rank" + std::to_string(replica) + ".error." + s.name));
  }
  ddp->set_powersgd_steps(of(position + "steps").data<int64_t>()[0]);
  return true;
}

}  // namespace artel::train
