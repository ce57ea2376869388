#include "artel/train/ps_server_checkpoint.h"

#include "artel/train/checkpoint_reader.h"
#include "artel/train/checkpoint_store.h"
#include "artel/train/held_part.h"

namespace artel::train {

namespace {

struct ServerHolding {
  ParameterHolding holding;     // for the optimizer state and step count
  optim::ElementRange elements;  // of the whole parameter
};

std::vector<ServerHolding> holdings_of(const parallel::PsShard& s) {
  std::vector<ServerHolding> out;
  for (const parallel::PsSegment& seg : s.layout.segments.at(static_cast<size_t>(s.server))) {
    const parallel::PsParameter& p = s.layout.params[seg.param];
    out.push_back({{.name = p.name,
                    .value = s.values.slice0(seg.offset, seg.offset + (seg.end - seg.begin)),
                    .whole = p.shape,
                    .writes_state = true,
                    .writes_step = seg.begin == 0},
                   {seg.begin, seg.end}});
  }
  return out;
}

std::vector<ParameterHolding> plain(const std::vector<ServerHolding>& h) {
  std::vector<ParameterHolding> out;
  for (const ServerHolding& x : h) out.push_back(x.holding);
  return out;
}

}  // namespace

std::function<void(const parallel::PsShard&, int64_t, const std::string&)> save_ps_shard(int64_t keep_last) {
  return [keep_last](const parallel::PsShard& s, int64_t step, const std::string& dir) {
    const std::vector<ServerHolding> held = holdings_of(s);
    std::vector<HeldPart> parts = parts_to_write(plain(held), s.optimizer);  // state and step counts
    for (const ServerHolding& h : held)
      parts.push_back({kModelKey + h.holding.name, DType::f32, h.holding.whole, nn::Split{}, 0, 1, h.elements,
                       h.holding.value});
    CheckpointStore(dir, keep_last).write_shard(step, 1 + s.server, parts, std::nullopt);
  };
}

std::function<void(const parallel::PsShard&, const std::string&)> restore_ps_shard() {
  return [](const parallel::PsShard& s, const std::string& dir) {
    const std::vector<ServerHolding> held = holdings_of(s);
    std::vector<HeldPart> parts = parts_to_read(plain(held), s.optimizer);
    for (HeldPart& p : parts)  // parts_to_read asks for the value whole; the server's is its elements of it
      if (p.key.compare(0, std::string(kModelKey).size(), kModelKey) == 0)
        for (const ServerHolding& h : held)
          if (p.key == kModelKey + h.holding.name) p.range = h.elements;
    const ShardedCheckpoint ck(dir);
    std::vector<bool> found;
    for (HeldPart& p : parts) found.push_back(ck.read(p));
    load_optimizer_parts(parts, found, s.optimizer, dir);
  };
}

}  // namespace artel::train
