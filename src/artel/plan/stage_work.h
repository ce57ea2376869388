// StageWork: what one worker of one pipeline stage does for one micro-batch
// — seconds of computation and of tensor-parallel collectives in forward
// and backward, the FLOPs, the activation bytes it keeps until backward,
// the parameters it holds and what it sends to the next stage. Built from a
// GPT's shape (every product and streaming kernel of Megatron's block,
// split over tp) or from a user's per-layer costs (stages cut as
// listed_stage_layers says).
//
// Time of a kernel: matrix products by gemm_seconds() (the cluster's rate
// for that shape, or peak × efficiency); the kernels that only stream
// memory — layer norms, GELU, softmax, dropout, residual adds, the q/k/v
// transposes, cross-entropy — by their bytes read and written over the
// worker's memory bandwidth. Backward is twice forward (products and
// streams alike).
//
// Activations kept per micro-batch: kept_activations.h, under the workload's
// accounting (Megatron-LM's or artel's). Listed layers keep what they were
// measured to keep, the last stage the loss's logits gradient besides, and
// a stage's backward holds the gradients of a layer's output and input at once.
//
//   std::vector<StageWork> w = stage_work(model, cluster, layout, workload);
//   w[s].forward_compute + w[s].forward_tensor_parallel;   // seconds, one micro-batch
#pragma once

#include <cstddef>
#include <vector>

#include "artel/parallel/bucket_plan.h"
#include "artel/parallel/stages.h"
#include "artel/plan/cluster.h"
#include "artel/plan/layout.h"
#include "artel/plan/model_description.h"

namespace artel::plan {

// A weight matrix n × m as one worker holds it (PowerSGD compresses these).
struct Matrix {
  double n = 0, m = 0;
};

// One parameter tensor as one worker holds it, and the unit (embedding,
// layer, head) whose backward makes its gradient.
struct ParameterTensor {
  double elements = 0;
  size_t unit = 0;
  // An embedding table tied to the head in this stage, under plain data
  // parallelism (tp = pp = 1): artel's DDP may keep its lookup's rows apart
  // and reduce it once the head's backward is done (Note [Tables apart]).
  bool tied_table = false;
};

struct StageWork {
  // seconds, one micro-batch, one worker
  double forward_compute = 0;
  double backward_compute = 0;          // recomputation included
  double recompute_compute = 0;         // of which the recomputation
  double forward_tensor_parallel = 0;   // tp collectives of forward
  double backward_tensor_parallel = 0;  // of backward, recomputation's forward included
  double flops = 0;                     // matrix-product FLOPs: forward + backward + recomputation
  // bytes, one micro-batch, one worker
  double activation_bytes = 0;  // kept from forward until backward
  double working_bytes = 0;     // transient: one block's activation gradients in its backward, plus what recomputation rebuilds
  double boundary_bytes = 0;    // sent to the next stage (or its gradient received back)
  double tensor_parallel_message_bytes = 0;  // one tp collective's (b, s, h) buffer; 0 without tp
  // parameters one worker holds for this stage (after tp, before ZeRO)
  double parameters = 0;
  // Its parameter tensors in the model's order (the order DDP buckets them
  // in), each with its unit; ZeRO-3 gathers a unit at a time.
  std::vector<ParameterTensor> tensors;
  // The first unit's weights are used again by the last (a GPT's embedding
  // tied to its head in one stage): ZeRO-3 stages its gradients from the
  // head's backward, the first, to the embedding's, the last.
  bool first_unit_tied_to_last = false;
  // Bytes of the rows (and their ids) one micro-batch's lookup of a tied
  // table hands over on one worker (ParameterTensor::tied_table): a row a
  // token, the most it can be (DDP sends a row read twice once).
  double table_rows_bytes = 0;
  std::vector<double> unit_backward;    // each unit's backward seconds (tp collectives excluded): when its gradients are ready
  std::vector<Matrix> matrices;         // the weight matrices among them (GPT only)
};

// One entry per pipeline stage. Validate the layout first (validate_layout).
std::vector<StageWork> stage_work(const ModelDescription& model, const Cluster& cluster, const Layout& layout,
                                  const Workload& workload);

// The layers [first, last) of each pipeline stage of a model given by its
// layers (not a GPT): cut where their parameters balance, as `artel train`
// cuts a model's pieces by default (parallel::balanced_stages over
// --stage-layers params), so any stage count up to the layers is a layout;
// under the interleaved schedule the P·chunks virtual stages in pipeline
// order (stage s holds s, s + P, ...), cut the same way.
std::vector<parallel::PieceRange> listed_stage_layers(const ModelDescription& model, const Layout& layout);

// Bytes of one activation element at this precision (bf16 2, fp32 4).
double activation_element_bytes(Precision p);

// Parameters by unit (embedding, each layer, head), one entry per unit.
std::vector<double> unit_parameters(const StageWork& st);

// A DDP bucket as the planner times it: its parameters, and the unit whose
// gradients complete it (its earliest: backward runs the units last to first).
struct UnitBucket {
  double parameters = 0;
  size_t completed_by = 0;
  bool table = false;  // a tied table kept apart: its lookup's rows are gathered at the end
};

// Whether artel's DDP keeps tied tables apart under this layout (Note
// [Tables apart]): its own runs (Workload::tables_apart), ZeRO 0-2, no PowerSGD.
bool keeps_tables_apart(const Layout& l, const Workload& w);

// DDP's buckets (parallel/bucket_plan.h) over the stage's tensors, cut
// between tensors as artel's and PyTorch's DDP cut them. `tables_apart`:
// as artel's DDP keeps a tied table of a bucket's size or more apart, in a
// bucket of its own, last, completed by the head's unit (Note [Tables apart]).
std::vector<UnitBucket> unit_buckets(const StageWork& st, const parallel::BucketOptions& opts, bool tables_apart = false);

}  // namespace artel::plan
