// A model's per-layer costs (LayerCosts, the --model-costs format) measured
// instead of typed: its plan's pieces (nn/parallel_plan.h) run once, in
// order, as one worker runs them, on a batch of real inputs. So the planner
// serves any nn::Model — the MLP, the CNN, the word LM, a user's own — not
// only a GPT whose costs follow from its shape. Per piece, each divided by
// the batch's samples:
// - forward_flops: its matrix products' FLOPs (kernels::ProductFlops: every
//   gemm, attention's products as whole ones);
// - parameters: those of the modules it names, each counted at the first
//   piece that uses it (a head tied to the embedding is not counted again);
// - activation_bytes: how much the tensors alive grew while it ran, its
//   input let go: what its forward keeps for backward plus its output (which
//   the next piece keeps or lets go), less an input nothing kept; never
//   below 0;
// - output_bytes: the tensors it hands on.
// A piece that is not a layer (an embedding, a head, an input check) is
// added to its neighbouring layer, the one whose pipeline stage runs it.
// What the loss keeps is in no layer, as in a costs file (the planner adds
// it to the last stage: stage_work.h).
//
// Under tensor parallelism: a model whose plan has tensor-parallel rules is
// also measured as one rank of the smallest group its rules divide it into
// (ranks as threads, comm/thread_group.h), and each cost's split part
// follows from the two (model_description.h): a rank's products, shards and
// activations, and what its forward all-reduces (TensorParallelTraffic).
// The live bytes are the process's, so a rank's activations are the
// ranks' mean; they differ by little (rank 0 lays a row layer's bias and
// residual into its sum, the others keep zeros in their place).
//
// Selective recomputation: measured again with the model's cores marked
// (nn::Model::set_recompute): what a layer keeps less, and what its
// backward runs more — each piece's backward FLOPs with and without.
//
//   ModelDescription m = measure_model_costs("mlp", model, batch.x);  // batch.x: (B, 784)
//   ModelDescription t = measure_model_costs("wordlm", [&] { return models::declare_model(cfg); }, ids, 1);
//   std::ofstream("mlp_costs.json") << model_costs_json(m, "measured").dump(2);
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>

#include "artel/core/tensor.h"
#include "artel/nn/model.h"
#include "artel/plan/model_description.h"

namespace artel::plan {

// Runs `model`'s pieces on `input` (its batch, samples along dimension 0)
// with the graph recorded, then lets the graph go. Throws Error when the
// model declares no layer piece or the batch is empty.
ModelDescription measure_model_costs(const std::string& name, nn::Model& model, const Tensor& input);

// A new declared instance of the model (no storage), as models::declare_model gives.
using DeclareModel = std::function<std::unique_ptr<nn::Model>()>;

// How the pieces' work outside matrix products is measured: timed on
// `batch` (as training runs one) at one thread, their seconds outside the
// products (ProductFlops::seconds) made bytes at `bytes_per_second`, this
// machine's rate for artel's streaming kernels — the planner's streaming
// rate (bandwidth × memory_efficiency) of a cluster calibrated here. So on
// this machine the planner gives back the time measured, and elsewhere
// that time scaled by the two machines' memory speeds.
struct StreamTiming {
  Tensor batch;
  double bytes_per_second = 0;
};

// What the declared model's measurement adds to the whole model's costs.
// Each part runs the model again (the tensor-parallel one twice, on
// threads), so a caller that needs less asks for less: artel train's
// memory check measures only what its layout uses.
struct MeasuredParts {
  std::optional<StreamTiming> timing;  // stream_bytes
  bool selective = true;               // the selective cores' costs
  bool tensor_parallel = true;         // degrees and per-layer splits, when the plan splits layers
};

// The same, on a model drawn from `seed`, with `parts`: the measurement
// `artel plan` makes of a run's model (all of them, timed).
ModelDescription measure_model_costs(const std::string& name, const DeclareModel& declare, const Tensor& input,
                                     uint64_t seed, const MeasuredParts& parts = {});

// The model-costs file of `m`'s layers (docs/PLAN.md), which
// parse_model_costs reads back to the same numbers.
nlohmann::ordered_json model_costs_json(const ModelDescription& m, const std::string& source);

}  // namespace artel::plan
