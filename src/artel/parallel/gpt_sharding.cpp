#include "artel/parallel/gpt_sharding.h"

#include <algorithm>
#include <limits>

#include "artel/core/error.h"
#include "artel/parallel/shard.h"

namespace artel::parallel {

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

void check_stage_count(const models::ModelConfig& cfg, int stages) {
  if (stages < 1 || stages > cfg.n_layer)
    throw Error(detail::concat("pipeline: ", stages, " stages for a model of ", cfg.n_layer, " blocks"),
                "every stage needs at least one block: use --pp between 1 and --n-layer");
}

}  // namespace

PieceCosts parameter_costs(const models::ModelConfig& cfg) {
  const double C = static_cast<double>(cfg.n_embd);
  return {.embeddings = static_cast<double>(cfg.vocab_size + cfg.block_size) * C,
          .block = 12 * C * C + 13 * C,
          .head = 2 * C};  // ln_f; the lm_head is wte, counted on the first stage
}

std::vector<BlockRange> balanced_stages(const models::ModelConfig& cfg, int stages) {
  return balanced_stages(cfg, stages, parameter_costs(cfg));
}

std::vector<BlockRange> balanced_stages(const models::ModelConfig& cfg, int stages, const PieceCosts& costs) {
  check_stage_count(cfg, stages);
  const int64_t L = cfg.n_layer;
  // cost(s, a, b): stage s holding blocks [a, b).
  auto cost = [&](int s, int64_t a, int64_t b) {
    return static_cast<double>(b - a) * costs.block + (s == 0 ? costs.embeddings : 0) +
           (s == stages - 1 ? costs.head : 0);
  };
  // best[s][b]: the smallest largest-stage cost of stages 0..s-1 holding blocks [0, b).
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> best(stages + 1, std::vector<double>(L + 1, inf));
  std::vector<std::vector<int64_t>> cut(stages + 1, std::vector<int64_t>(L + 1, 0));
  best[0][0] = 0;
  for (int s = 1; s <= stages; ++s)
    for (int64_t b = s; b <= L; ++b)
      for (int64_t a = s - 1; a < b; ++a) {
        if (best[s - 1][a] == inf) continue;
        double worst = std::max(best[s - 1][a], cost(s - 1, a, b));
        if (worst < best[s][b]) best[s][b] = worst, cut[s][b] = a;  // ties: the earliest cut, fewer blocks first
      }
  std::vector<BlockRange> ranges(stages);
  for (int64_t s = stages, b = L; s > 0; --s) {
    ranges[s - 1] = {cut[s][b], b};
    b = cut[s][b];
  }
  return ranges;
}

std::vector<BlockRange> explicit_stages(const models::ModelConfig& cfg, const std::vector<int64_t>& blocks_per_stage) {
  check_stage_count(cfg, static_cast<int>(blocks_per_stage.size()));
  std::vector<BlockRange> ranges;
  int64_t next = 0;
  for (int64_t n : blocks_per_stage) {
    if (n < 1)
      throw Error(detail::concat("pipeline: stage ", ranges.size(), " is given ", n, " blocks"),
                  "every stage of --stage-layers needs at least one block");
    ranges.push_back({next, next + n});
    next += n;
  }
  if (next != cfg.n_layer)
    throw Error(detail::concat("pipeline: --stage-layers add up to ", next, " blocks, the model has ", cfg.n_layer),
                "give one count per stage, summing to --n-layer");
  return ranges;
}

bool is_tied_embedding(const std::string& full_name) { return full_name == "transformer.wte.weight"; }

int stage_of(const std::string& full_name, const std::vector<BlockRange>& stages) {
  const int last = static_cast<int>(stages.size()) - 1;
  const std::string blocks = "transformer.h.";
  if (starts_with(full_name, blocks)) {
    int64_t i = std::stoll(full_name.substr(blocks.size()));
    for (int s = 0; s <= last; ++s)
      if (i >= stages[s].first && i < stages[s].last) return s;
    throw Error(detail::concat("pipeline: parameter ", full_name, " names block ", i, " outside every stage"));
  }
  if (starts_with(full_name, "transformer.ln_f.")) return last;
  return 0;  // wte, wpe
}

ShardKind shard_kind(const std::string& n) {
  if (is_tied_embedding(n)) return ShardKind::rows;
  if (ends_with(n, ".attn.c_attn.weight") || ends_with(n, ".attn.c_attn.bias")) return ShardKind::qkv_rows;
  if (ends_with(n, ".mlp.c_fc.weight") || ends_with(n, ".mlp.c_fc.bias")) return ShardKind::rows;
  if (ends_with(n, ".attn.c_proj.weight") || ends_with(n, ".mlp.c_proj.weight")) return ShardKind::columns;
  return ShardKind::replicated;
}

const char* shard_kind_name(ShardKind kind) {
  switch (kind) {
    case ShardKind::replicated: return "replicated";
    case ShardKind::rows: return "rows";
    case ShardKind::columns: return "columns";
    case ShardKind::qkv_rows: return "qkv_rows";
  }
  return "?";
}

// qkv_rows: the tensor seen as (3, rows·rest): part p of dimension 1 is rows
// [p·C/T, (p+1)·C/T) of each of q, k and v — the heads of rank p.
Tensor take_shard(const Tensor& full, ShardKind kind, int part, int parts) {
  switch (kind) {
    case ShardKind::replicated: return full.clone();
    case ShardKind::rows: return shard_of(full, 0, part, parts);
    case ShardKind::columns: return shard_of(full, 1, part, parts);
    case ShardKind::qkv_rows: {
      ARTEL_CHECK(full.size(0) % 3 == 0, "qkv shard: first dimension of ", shape_str(full.shape()),
                  " is not a multiple of 3");
      ARTEL_CHECK(full.size(0) / 3 % parts == 0, "qkv shard: ", full.size(0) / 3, " rows of q, k and v do not split into ",
                  parts, " parts");
      Shape shape = full.shape();
      Tensor mine = shard_of(full.view({3, full.numel() / 3}), 1, part, parts);
      shape[0] /= parts;
      return mine.view(shape);
    }
  }
  return full.clone();
}

Tensor join_shards(const std::vector<Tensor>& parts, ShardKind kind) {
  ARTEL_CHECK(!parts.empty(), "join_shards: no parts");
  switch (kind) {
    case ShardKind::replicated: return parts[0].clone();
    case ShardKind::rows: return unshard(parts, 0);
    case ShardKind::columns: return unshard(parts, 1);
    case ShardKind::qkv_rows: {
      std::vector<Tensor> views;
      for (const Tensor& p : parts) views.push_back(p.view({3, p.numel() / 3}));
      Shape shape = parts[0].shape();
      shape[0] *= static_cast<int64_t>(parts.size());
      return unshard(views, 1).view(shape);
    }
  }
  return parts[0].clone();
}

}  // namespace artel::parallel
