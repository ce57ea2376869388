#include "artel/parallel/model_shard.h"

#include <algorithm>

#include "artel/autograd/ops.h"
#include "artel/core/error.h"
#include "artel/nn/dropout.h"
#include "artel/nn/embedding.h"
#include "artel/nn/layer_norm.h"
#include "artel/nn/linear.h"
#include "artel/parallel/sequence_parallel.h"
#include "artel/parallel/tensor_parallel.h"

namespace artel::parallel {
namespace {

bool used_by(const nn::Piece& piece, const std::string& param) {
  for (const std::string& m : piece.modules)
    if (nn::path_within(param, m)) return true;
  return false;
}

std::string joined(const std::string& module, const char* param) { return module.empty() ? param : module + "." + param; }

}  // namespace

std::vector<bool> piece_layers(const nn::Model& model) {
  std::vector<bool> out;
  for (const nn::Piece& p : model.plan().pieces) out.push_back(p.layer);
  return out;
}

std::vector<double> piece_parameter_counts(const nn::Model& model) {
  const std::vector<nn::DeclaredParameter> params = model.declared_parameters();
  std::vector<double> out;
  for (const nn::Piece& piece : model.plan().pieces) {
    double n = 0;
    for (const nn::DeclaredParameter& d : params)
      if (used_by(piece, d.name)) n += static_cast<double>(shape_numel(d.shape));
    out.push_back(n);
  }
  return out;
}

ModelShard::ModelShard(nn::Model& model, ShardPlace place) : model_(model), place_(std::move(place)) {
  const int64_t pieces = static_cast<int64_t>(model_.plan().pieces.size());
  if (place_.stages.empty()) place_.stages = {{0, pieces}};
  const int virtual_stages = static_cast<int>(place_.stages.size());
  ARTEL_CHECK(place_.chunks >= 1 && virtual_stages % place_.chunks == 0, "model shard: ", virtual_stages,
              " virtual stages do not make ", place_.chunks, " chunks a stage");
  ARTEL_CHECK(place_.stage >= 0 && place_.stage < stages(), "model shard: stage ", place_.stage, " of ", stages());
  ARTEL_CHECK(pieces > 0 || stages() == 1, "pipeline parallelism needs a model that declares its pieces "
              "(nn::ParallelPlan::pieces); this one has none");
  check_stages_cover(pieces);
  if (place_.tp && place_.tp->size() == 1) place_.tp = nullptr;  // a group of one splits nothing
  for (const nn::DeclaredParameter& d : model_.declared_parameters()) {
    index_[d.name] = placements_.size();
    placements_.push_back({d.name, d.shape, {}, {}});
  }
  apply_tensor_parallel();
  if (place_.sequence_parallel) apply_sequence_parallel();
  place_parameters();
}

// A user's stages (balanced_stages and explicit_stages make them so): in
// order, each non-empty, each starting where the last ended, together the
// pieces [0, pieces). A stage past the last piece read outside the plan.
void ModelShard::check_stages_cover(int64_t pieces) const {
  if (pieces == 0) return;  // a model without pieces: one stage of everything (checked above)
  int64_t next = 0;
  for (size_t s = 0; s < place_.stages.size(); ++s) {
    const PieceRange& r = place_.stages[s];
    if (r.first != next || r.last <= r.first || r.last > pieces)
      throw Error("model shard: " + std::string(place_.chunks > 1 ? "virtual " : "") + "stage " + std::to_string(s) +
                      " holds pieces [" + std::to_string(r.first) + ", " +
                      std::to_string(r.last) + "), but the stages must cut the model's " + std::to_string(pieces) +
                      " pieces in order, each stage non-empty and starting where the last ended (at " +
                      std::to_string(next) + ")",
                  "make them with parallel::balanced_stages or explicit_stages");
    next = r.last;
  }
  if (next != pieces)
    throw Error("model shard: the stages end at piece " + std::to_string(next) + " of the model's " +
                    std::to_string(pieces) + "; the pieces after it would run nowhere",
                "make the stages with parallel::balanced_stages or explicit_stages");
}

// Each rule of the plan: the split of every parameter of the matching
// layers, checked against the group now (before anything is allocated), and
// the collectives the layer runs around its own ops.
void ModelShard::apply_tensor_parallel() {
  const nn::ParallelPlan& plan = model_.plan();
  comm::ProcessGroup* g = place_.tp;
  const int r = tp_rank(), T = g ? tp_size() : std::max(1, place_.tp_degree);
  auto set_split = [&](const std::string& name, const nn::Split& split) {
    ParameterPlacement& p = placements_.at(index_.at(name));
    p.split = split;
    try {
      nn::part_geometry(p.shape, split, r, T);
    } catch (const Error& e) {
      throw Error("tensor parallelism: " + name + " " + shape_str(p.shape) + " does not split over " +
                      std::to_string(T) + " ranks as the model's plan declares (" + e.what() + ")",
                  "choose --tp dividing the model's split dimensions (heads, hidden features)");
    }
  };
  auto enter = [g](const Variable& x) { return copy_to_tensor_parallel(x, *g); };
  auto reduce = [g](const Variable& x) { return reduce_from_tensor_parallel(x, *g); };
  auto once = [g](const Variable& x) { return once_over_tensor_parallel(x, *g); };
  const std::vector<std::pair<std::string, nn::Module*>> modules = model_.named_modules();
  for (const nn::TensorParallelRule& rule : plan.tensor_parallel) {
    int matched = 0;
    for (const auto& [path, module] : modules) {
      if (!nn::path_matches(rule.pattern, path)) continue;
      ++matched;
      if (auto* lin = dynamic_cast<nn::Linear*>(module)) {
        ARTEL_CHECK(rule.style != nn::TensorParallelStyle::vocab, "plan: ", path, " is a Linear, not an Embedding");
        const bool column = rule.style == nn::TensorParallelStyle::column;
        set_split(joined(path, "weight"), {.dim = column ? 0 : 1, .groups = column ? rule.groups : 1, .unit = rule.unit});
        if (lin->bias().defined() || index_.count(joined(path, "bias")))
          set_split(joined(path, "bias"),
                    column ? nn::Split{.dim = 0, .groups = rule.groups, .unit = rule.unit} : nn::Split{});
        if (!g) continue;
        if (column) lin->set_parallel({.kind = nn::LinearParallel::Kind::column, .enter = enter});
        else lin->set_parallel({.kind = nn::LinearParallel::Kind::row, .reduce = reduce, .once = once});
      } else if (auto* emb = dynamic_cast<nn::Embedding*>(module)) {
        ARTEL_CHECK(rule.style == nn::TensorParallelStyle::vocab, "plan: ", path, " is an Embedding: split it as vocab");
        const nn::Split rows{.dim = 0, .pad = true};
        set_split(joined(path, "weight"), rows);
        const int64_t first = nn::part_geometry({emb->num_embeddings(), emb->dim()}, rows, r, T).begin;
        if (path == plan.vocab_parallel_logits) logits_first_ = first, logits_vocab_ = emb->num_embeddings();
        if (g) emb->set_parallel({.first_row = first, .enter = enter, .reduce = reduce});
      } else {
        throw Error("plan: tensor-parallel rule '" + rule.pattern + "' matches " + path +
                        ", which is neither an nn::Linear nor an nn::Embedding",
                    "split Linear layers column- or row-wise and Embeddings by vocabulary");
      }
    }
    if (matched == 0)
      throw Error("plan: tensor-parallel rule '" + rule.pattern + "' matches no module of the model",
                  "check the pattern against the model's module paths ('*' stands for one component)");
  }
}

// Note [The sequence-parallel region]: with sequence parallelism the stream
// between the plan's layer pieces holds only this rank's tokens
// (sequence_parallel.h). It is scattered where a layer piece follows a piece
// that is not one (a GPT's embeddings), and gathered whole where a piece that
// is not a layer follows (the head) or the model ends; both cuts depend on
// the pieces alone, so a pipeline's stages agree on them, and activations
// cross stage boundaries split. Inside the region:
// - a column-parallel Linear gathers its input's tokens (its gradient
//   reduce-scattered back) instead of Megatron's f;
// - a row-parallel Linear reduce-scatters its output by tokens instead of
//   all-reducing it, and adds its bias and residual to this rank's tokens;
// - every replicated parameter (a layer norm's, a whole Linear's, a
//   row-parallel bias) now sees only this rank's tokens, so its gradient is
//   summed over the group, by passing it through f (identity forward,
//   all-reduce backward) where it is used;
// - a dropout draws the whole mask, as the single worker does, and keeps its
//   rank's tokens of it.
// A module with parameters of another kind inside the region is refused:
// nothing says how its gradient is to be summed.
void ModelShard::apply_sequence_parallel() {
  const nn::ParallelPlan& plan = model_.plan();
  comm::ProcessGroup* g = place_.tp;
  std::vector<std::string> region;  // the layer pieces' modules
  for (const nn::Piece& piece : plan.pieces)
    if (piece.layer) region.insert(region.end(), piece.modules.begin(), piece.modules.end());
  if (region.empty())
    throw Error("sequence parallelism splits the tokens of the stream between a model's layer pieces, and this "
                "model's plan declares none (nn::Piece::layer)",
                "declare the model's layers as pieces of its plan, or drop --sequence-parallel");
  auto in_region = [&](const std::string& path) {
    return std::any_of(region.begin(), region.end(), [&](const std::string& m) { return nn::path_within(path, m); });
  };
  // Each function reads the switch at its call (split_tokens): unsplit, it is plain tensor parallelism.
  const std::shared_ptr<bool> on = tokens_split_;
  auto shared = [g, on](const Variable& p) { return *on ? copy_to_tensor_parallel(p, *g) : p; };
  const int rank = tp_rank(), ranks = tp_size();
  for (const auto& [path, module] : model_.named_modules()) {
    if (!in_region(path)) continue;
    if (auto* lin = dynamic_cast<nn::Linear*>(module)) {
      if (!g) continue;
      nn::LinearParallel p = lin->parallel();
      if (p.kind == nn::LinearParallel::Kind::column) {
        p.enter = [g, on](const Variable& x) {
          return *on ? gather_from_sequence_parallel(x, *g, SequenceGrad::partial) : copy_to_tensor_parallel(x, *g);
        };
      } else {
        if (p.kind == nn::LinearParallel::Kind::row)
          p.reduce = [g, on](const Variable& x) {
            return *on ? reduce_scatter_to_sequence_parallel(x, *g) : reduce_from_tensor_parallel(x, *g);
          }, p.once = nullptr;
        p.shared = shared;
      }
      lin->set_parallel(std::move(p));
    } else if (auto* norm = dynamic_cast<nn::LayerNorm*>(module)) {
      if (g) norm->set_shared(shared);
    } else if (auto* drop = dynamic_cast<nn::Dropout*>(module)) {
      drop->set_token_split({.whole = [ranks, on](const Shape& part) {
                               return *on ? sequence_whole_shape(part, ranks, "dropout") : part;
                             },
                             .part = [rank, ranks, on](const Tensor& whole) {
                               return *on ? tokens_of(whole, rank, ranks) : whole;
                             }});
    } else {
      for (const nn::DeclaredParameter& d : module->declared_parameters())
        if (d.name.find('.') == std::string::npos)
          throw Error("sequence parallelism: " + joined(path, d.name.c_str()) + " belongs to a module that is "
                          "neither an nn::Linear nor an nn::LayerNorm, inside the model's layer pieces, where each "
                          "rank sees only its own tokens; artel cannot tell how to sum its gradient over the group",
                      "build the layers from nn::Linear and nn::LayerNorm, or drop --sequence-parallel");
    }
  }
}

void ModelShard::place_parameters() {
  const std::vector<nn::Piece>& pieces = model_.plan().pieces;
  const int P = stages();
  for (ParameterPlacement& p : placements_) {
    if (pieces.empty()) p.stages = {0};
    std::vector<int> chunk_at(static_cast<size_t>(P), -1);  // per stage: the chunk using it
    for (size_t v = 0; v < place_.stages.size() && !pieces.empty(); ++v)
      for (int64_t i = place_.stages[v].first; i < place_.stages[v].last; ++i) {
        if (!used_by(pieces[static_cast<size_t>(i)], p.name)) continue;
        const int stage = static_cast<int>(v) % P, chunk = static_cast<int>(v) / P;
        int& seen = chunk_at[static_cast<size_t>(stage)];
        if (seen >= 0 && seen != chunk)
          throw Error(detail::concat("model shard: parameter ", p.name, " is used by chunks ", seen, " and ", chunk,
                                     " of stage ", stage, "; a stage's chunks must not share parameters, since each "
                                     "chunk's gradients are final after its own last backward"),
                      "cut the model into other chunks (--chunks, --stage-layers), or use --schedule 1f1b");
        if (seen < 0) p.stages.push_back(stage);
        seen = chunk;
      }
    std::sort(p.stages.begin(), p.stages.end());
    if (p.stages.empty())
      throw Error("plan: parameter " + p.name + " is used by no piece of the model's plan",
                  "list every module a piece uses in its Piece::modules");
  }
  for (const nn::DeclaredParameter& d : model_.declared_parameters()) {
    const std::vector<int>& s = placement(d.name).stages;
    if (std::find(s.begin(), s.end(), place_.stage) != s.end()) mine_.emplace_back(d.name, d.param);
  }
}

const ParameterPlacement& ModelShard::placement(const std::string& name) const {
  auto it = index_.find(name);
  ARTEL_CHECK(it != index_.end(), "the model has no parameter ", name);
  return placements_[it->second];
}

void ModelShard::materialize(uint64_t seed) {
  std::map<std::string, nn::DeclaredParameter> declared;
  for (nn::DeclaredParameter& d : model_.declared_parameters()) declared.emplace(d.name, d);
  for (auto& [name, p] : mine_) {
    const ParameterPlacement& where = placement(name);
    const nn::DeclaredParameter& d = declared.at(name);
    if (!d.init) {  // given a value at registration: this worker's part of it
      p.value() = nn::take_part(p.value(), where.split, tp_rank(), tp_size());
      continue;
    }
    Tensor t = Tensor::empty(nn::part_geometry(where.shape, where.split, tp_rank(), tp_size()).shape);
    nn::fill(t, *d.init, seed, nn::stream_of(name), where.shape, where.split, tp_rank(), tp_size());
    p.value() = t;
  }
}

void ModelShard::load(const std::function<Tensor(const std::string&)>& whole) {
  for (auto& [name, p] : mine_) {
    const ParameterPlacement& where = placement(name);
    Tensor t = whole(name);
    ARTEL_CHECK(t.defined() && t.shape() == where.shape, "loading ", name, ": got ",
                t.defined() ? shape_str(t.shape()) : std::string("nothing"), ", the model has ", shape_str(where.shape));
    p.value() = nn::take_part(t, where.split, tp_rank(), tp_size());
  }
}

nn::NamedParameters ModelShard::parameters() const { return mine_; }

std::vector<std::pair<std::string, Variable>> ModelShard::tied() const {
  std::vector<std::pair<std::string, Variable>> out;
  for (const auto& [name, p] : mine_)
    if (placement(name).stages.size() > 1) out.emplace_back(name, p);
  return out;
}

std::vector<PieceRange> ModelShard::held_pieces() const {
  std::vector<PieceRange> out;
  for (int c = 0; c < place_.chunks; ++c) out.push_back(place_.stages[static_cast<size_t>(c * stages() + place_.stage)]);
  return out;
}

nn::Activations ModelShard::forward(const nn::Activations& in, int chunk) {
  const nn::ParallelPlan& plan = model_.plan();
  ARTEL_CHECK(chunk >= 0 && chunk < place_.chunks, "model shard: chunk ", chunk, " of ", place_.chunks);
  if (plan.pieces.empty()) return {model_.forward(in.at(0).value())};
  const PieceRange& r = place_.stages[static_cast<size_t>(chunk * stages() + place_.stage)];
  const auto first = static_cast<size_t>(r.first), last = static_cast<size_t>(r.last);
  if (!splits_tokens()) return model_.run_pieces(first, last, in);
  nn::Activations a = in;
  for (size_t i = first; i < last; ++i) a = model_.run_pieces(i, i + 1, crossing_into(i, std::move(a)));
  return last == plan.pieces.size() ? crossing_into(last, std::move(a)) : a;
}

nn::Activations ModelShard::crossing_into(size_t piece, nn::Activations in) {
  const std::vector<nn::Piece>& pieces = model_.plan().pieces;
  const bool inside = piece < pieces.size() && pieces[piece].layer;
  const bool was_inside = piece > 0 && pieces[piece - 1].layer;
  if (inside == was_inside || !*tokens_split_) return in;
  for (Variable& x : in)
    x = inside ? scatter_to_sequence_parallel(x, *place_.tp)
               : gather_from_sequence_parallel(x, *place_.tp, SequenceGrad::replicated);
  return in;
}

Variable ModelShard::loss(const Variable& logits, const Tensor& targets) {
  const Tensor y = targets.view({-1});
  if (!place_.tp || model_.plan().vocab_parallel_logits.empty()) return autograd::cross_entropy(logits, y);
  return vocab_parallel_cross_entropy(logits, y, logits_first_, *place_.tp, logits_vocab_);
}

std::vector<float> ModelShard::last_logits(const Variable& logits) {
  const Tensor& v = logits.value();
  const int64_t columns = v.size(-1), T = v.numel() / columns;
  Tensor mine = v.view({T, columns}).slice0(T - 1, T).clone();  // (1, columns)
  Tensor row = mine;
  if (place_.tp && !model_.plan().vocab_parallel_logits.empty()) {
    row = Tensor::empty({1, columns * tp_size()});
    place_.tp->all_gather(mine, row)->wait();  // rank r's columns [r·columns, (r+1)·columns): Split's padded order
  }
  const int64_t vocab = logits_vocab_ > 0 ? logits_vocab_ : row.numel();
  return std::vector<float>(row.data<float>(), row.data<float>() + vocab);
}

}  // namespace artel::parallel
