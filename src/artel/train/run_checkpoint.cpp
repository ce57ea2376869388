#include "artel/train/run_checkpoint.h"

#include <string>

#include "artel/core/error.h"
#include "artel/models/model.h"
#include "artel/train/checkpoint_format.h"

namespace artel::train {

Compatibility run_compatibility(const TrainConfig& cfg, int64_t vocab_size) {
  Compatibility c;
  c.model_kind = cfg.model;
  if (models::trains_on_text(cfg.model))
    c.model_config = {{"vocab_size", vocab_size}, {"n_layer", cfg.n_layer},   {"n_head", cfg.n_head},
                      {"n_embd", cfg.n_embd},     {"block_size", cfg.block_size}};
  else
    c.model_config = {{"num_classes", vocab_size}};
  return c;
}

void save_run_checkpoint(Strategy& strategy, optim::Optimizer& optimizer, nn::Model& model,
                         const CheckpointStore& store, const RunPosition& pos) {
  if (strategy.reporter()) store.begin(pos.step);
  strategy.barrier();  // no worker writes its shard while a manifest of an earlier attempt could name it
  std::optional<StageDropout> dropout;
  if (strategy.writes_dropout())  // a model without dropout: a placeholder state
    dropout = StageDropout{strategy.stage(), model.dropout_rng() ? model.dropout_rng()->state() : RngState{}};
  if (const int shard = strategy.shard(); shard >= 0) {
    std::vector<HeldPart> parts = strategy.held_parts(optimizer);
    for (HeldPart& b : buffer_parts(strategy.checkpoint_buffers(model, /*writing=*/true))) parts.push_back(std::move(b));
    store.write_shard(pos.step, shard, parts, dropout);
  }
  strategy.write_other_shards(pos.step, store.dir());
  strategy.barrier();  // every shard is durable
  if (!strategy.reporter()) return;
  Manifest m;
  m.step = pos.step;
  m.consumed_samples = pos.consumed_samples;
  m.global_batch = pos.global_batch;
  m.model = pos.model;
  m.layout = pos.layout;
  store.commit(std::move(m), strategy.shards());
}

RestoreOutcome restore_run_checkpoint(Strategy& strategy, optim::Optimizer& optimizer, nn::Model& model,
                                      const ShardedCheckpoint& ck) {
  RestoreOutcome out;
  try {
    std::vector<HeldPart> wanted = strategy.wanted_parts(optimizer);
    std::vector<bool> found;
    for (HeldPart& p : wanted) found.push_back(ck.read(p));
    load_optimizer_parts(wanted, found, optimizer, ck.dir());
    // Buffers, in place. A checkpoint from before they were kept has none (its
    // model record lists no buffers): the model's own values stay.
    const bool kept = ck.manifest().model.contains("buffers");
    for (HeldPart& b : buffer_parts(strategy.checkpoint_buffers(model, /*writing=*/false)))
      if (!ck.read(b) && kept) checkpoint_corrupt(ck.dir(), "no tensor '" + b.key + "' (a buffer of the model)");
    out.compressor_restored = strategy.parts_restored(wanted, found);
    strategy.read_other_shards(ck.manifest().step, ck.dir());
    const std::vector<RngState>& dropout = ck.manifest().dropout;
    out.dropout_restored = static_cast<int>(dropout.size()) == strategy.stages();
    if (out.dropout_restored && model.dropout_rng())
      model.dropout_rng()->set_state(dropout[static_cast<size_t>(strategy.stage())]);
    out.ok = true;
  } catch (const Error& e) {
    out.problem = problem_of(e);
  }
  out.ok = strategy.all_agree(out.ok);
  if (out.ok) out.compressor_restored = strategy.all_agree(out.compressor_restored);
  return out;
}

}  // namespace artel::train
