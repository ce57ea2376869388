// ModelDescription: what the planner knows of a model — either a GPT's
// dimensions (TransformerShape: every cost follows from them, under any
// tensor-parallel split, recomputation and sequence parallelism), or a
// user's own model as a list of per-layer costs read from JSON, for which
// the planner splits inside a layer only what the costs say splits (their
// tensor-parallel parts, below).
//
// The per-layer JSON (--model-costs FILE.json), every number per sample
// (one sequence, or one row of the batch):
//
//   {"name": "my-mlp",
//    "layers": [{"name": "fc1", "forward_flops": 1.6e6, "parameters": 200960,
//                "activation_bytes": 4096, "output_bytes": 1024}, ...]}
//
// forward_flops: matrix-product FLOPs of the forward (backward costs twice);
// activation_bytes: what the forward keeps for backward; output_bytes: the
// tensor handed to the next layer (a pipeline send when a stage ends there);
// stream_bytes and backward_stream_bytes (optional): the memory traffic of
// its other work (norms, activations, pooling, im2col) in forward and in
// backward, timed at the device's streaming rate.
//
// A model whose plan splits layers over tensor-parallel ranks (Megatron's
// column and row splits, nn/parallel_plan.h) adds, per layer, the part of
// each cost that splits, and the file lists the degrees the plan divides by:
//
//   "tensor_parallel_degrees": [2, 4],
//   layers: {..., "split_forward_flops": 1.5e6, "split_parameters": 196608,
//            "split_activation_bytes": 2048, "tensor_parallel_bytes": 1024,
//            "tensor_parallel_collectives": 1}
//
// so one of t ranks costs (cost − split) + split / t, its activations
// tensor_parallel_activation_bytes more (what splitting adds, such as a row
// layer's partial sum that an op's backward reads); tensor_parallel_bytes
// is what its forward all-reduces over the t ranks (backward as much, in as
// many all-reduces), whole activations, the same at every t.
//
// A model that marks a core for selective recomputation (Korthikanti et
// al.: attention's scores) adds "recomputed_activation_bytes", what the
// layer no longer keeps, and "recomputed_forward_flops", what its backward
// reruns; both split over tp with the layer (attention's by heads).
//
//   ModelDescription m = read_model_costs("costs.json");
//   ModelDescription g = transformer_model("gpt2", {12, 12, 768, 1024, 50304});
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "artel/plan/transformer_shape.h"

namespace artel::plan {

struct LayerCosts {
  std::string name;
  double forward_flops = 0;  // per sample
  double parameters = 0;
  double activation_bytes = 0;  // per sample, kept for backward
  double output_bytes = 0;      // per sample, passed to the next layer
  // per sample, optional: the memory traffic of its work outside matrix
  // products in forward and in backward, at the device's streaming rate
  double stream_bytes = 0;
  double backward_stream_bytes = 0;
  // Under tensor parallelism (see above); 0 where nothing splits.
  double split_forward_flops = 0;
  double split_parameters = 0;
  double split_activation_bytes = 0;
  double tensor_parallel_activation_bytes = 0;  // per sample, more on each rank under any tp > 1
  double tensor_parallel_bytes = 0;        // per sample, forward
  double tensor_parallel_collectives = 0;  // all-reduces of the forward
  // Under selective recomputation (a core the model marks, such as
  // attention's): what it no longer keeps and what backward reruns of it;
  // 0 where the layer marks none.
  double recomputed_activation_bytes = 0;
  double recomputed_forward_flops = 0;

  // One of `tp` ranks' share of a cost whose `split` part divides.
  static double per_rank(double cost, double split, double tp) { return cost - split + split / tp; }
};

struct ModelDescription {
  std::string name;
  std::optional<TransformerShape> transformer;  // a GPT: costs derived from its shape
  std::vector<LayerCosts> layers;               // otherwise: the user's per-layer costs
  // Listed layers: whether any marks a core for selective recomputation.
  bool recomputes_selectively() const;
  // Listed layers: the tensor-parallel degrees above 1 the model's plan
  // splits into (empty: none, so tp stays 1).
  std::vector<int64_t> tensor_parallel_degrees;

  // The units a pipeline cuts between: a GPT's blocks, or the listed layers.
  int64_t pipeline_layers() const;
  // Every parameter once (a GPT's tied embedding counted once).
  double parameters() const;
};

ModelDescription transformer_model(const std::string& name, const TransformerShape& shape);

// Parses the per-layer JSON above; `origin` names the file in errors.
ModelDescription parse_model_costs(const nlohmann::json& j, const std::string& origin);
// Reads and parses a per-layer JSON file; throws Error naming the file.
ModelDescription read_model_costs(const std::string& path);

}  // namespace artel::plan
