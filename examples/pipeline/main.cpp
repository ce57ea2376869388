// Pipeline-parallel training of a model of your own (examples/common/spirals.h).
//
// The model's plan lists its pieces; parallel::balanced_stages cuts them into
// two stages where the parameter counts balance. Each worker builds and
// trains only its stage, with 1F1B over 4 micro-batches: the first stage
// sends activations on, the last computes the loss and sends gradients back.
// Every worker also trains a whole copy alone and compares losses and weights;
// the first prints the per-layer costs the planner would plan the model from.
//   artel launch -n 2 -- ./pipeline
#include <cstdio>

#include "../common/spirals.h"
#include "artel/comm/process_group.h"
#include "artel/optim/sgd.h"
#include "artel/parallel/mesh_groups.h"
#include "artel/parallel/model_shard.h"
#include "artel/parallel/pipeline_executor.h"
#include "artel/parallel/stages.h"
#include "artel/plan/measured_costs.h"

using namespace artel;
using autograd::Variable;
using nn::Activations;

int main() try {
  auto world = comm::init_process_group(comm::group_options_from_env());
  parallel::MeshGroups groups = parallel::make_mesh_groups(world, /*pp=*/2, /*tp=*/1);
  const int P = 2, M = 4, stage = groups.coord.pp, kSteps = 200, kBatch = 64, rows = kBatch / M;
  const uint64_t seed = 42;

  // This worker's stage: the pieces cut where the parameter counts balance.
  spirals::SpiralNet model;  // declared, no storage yet
  auto stages = parallel::balanced_stages(parallel::piece_layers(model), parallel::piece_parameter_counts(model), P);
  parallel::ModelShard shard(model, {.stages = stages, .stage = stage});
  shard.materialize(seed);  // draws only this stage's weights
  optim::Sgd opt(optim::one_group(shard.parameters(), 0.05f), {.momentum = 0.9f});
  parallel::PipelineExecutor pipeline(stage, P, groups.links);
  std::printf("stage %d holds pieces [%lld, %lld) of %zu\n", stage, (long long)stages[stage].first,
              (long long)stages[stage].last, model.plan().pieces.size());

  // The reference: the whole model on this worker alone, drawn from the same seed.
  spirals::SpiralNet copy;
  nn::materialize(copy, seed);
  optim::Sgd copy_opt(optim::one_group(copy.named_parameters(), 0.05f), {.momentum = 0.9f});

  // The planner's view of the same model: each layer piece's costs, measured
  // by running the pieces once on a few samples (save them as JSON with
  // plan::model_costs_json, and `artel plan --model-costs` plans layouts of it).
  if (world->rank() == 0) {
    Rng probe(3);
    auto [few, unused] = spirals::batch(4, probe);
    for (const plan::LayerCosts& l : plan::measure_model_costs("spiralnet", copy, few).layers)
      std::printf("layer %-7s %6.0f FLOPs %6.0f parameters %5.0f bytes kept, a sample\n", l.name.c_str(), l.forward_flops,
                  l.parameters, l.activation_bytes);
  }

  Rng data(7);  // the same global batches on every worker
  Tensor losses = Tensor::zeros({kSteps}), copy_losses = Tensor::zeros({kSteps});
  for (int step = 0; step < kSteps; ++step) {
    auto [x, label] = spirals::batch(kBatch, data);
    // One pipeline step. The first stage feeds micro-batch mb in; the last
    // returns its loss / M, so the gradients sum to those of the batch's mean.
    opt.zero_grad();
    parallel::StageFunctions fns;
    // `chunk`: the stage's model chunk (always 0 here; --schedule interleaved runs several).
    fns.forward = [&](int mb, int chunk, const Activations& received) {
      const bool first = shard.starts_pipeline(chunk);
      Activations out = shard.forward(first ? Activations{Variable(x.slice0(mb * rows, (mb + 1) * rows))} : received,
                                      chunk);
      if (!shard.ends_pipeline(chunk)) return out;  // sent on to the next stage
      Variable loss = autograd::mul(shard.loss(out[0], label.slice0(mb * rows, (mb + 1) * rows)), 1.0f / M);
      losses.data<float>()[step] += loss.item();
      return Activations{loss};
    };
    pipeline.run(parallel::one_f_one_b(M, P, stage), fns);
    opt.step();

    // The same step on the whole copy: one forward over the whole batch.
    copy_opt.zero_grad();
    Variable loss = autograd::cross_entropy(copy.forward(x), label);
    loss.backward();
    copy_opt.step();
    copy_losses.data<float>()[step] = loss.item();
  }

  // Only the last stage saw the losses: sum them onto every worker.
  world->all_reduce(losses)->wait();
  float loss_err = 0, weight_err = 0;
  for (int s = 0; s < kSteps; ++s) {
    float a = losses.data<float>()[s], b = copy_losses.data<float>()[s];
    loss_err = std::max(loss_err, std::abs(a - b) / std::abs(b));
    if (world->rank() == 0 && (s % 50 == 0 || s == kSteps - 1))
      std::printf("step %3d  loss %.5f (pipeline)  %.5f (one worker)\n", s, a, b);
  }
  // Each stage's weights against the same-named ones of the copy.
  nn::StateDict whole = copy.state_dict();
  for (auto& [name, p] : shard.parameters()) weight_err = std::max(weight_err, spirals::max_abs_diff(p.value(), whole.at(name)));
  return spirals::report_against_one_worker(*world, weight_err, loss_err);
} catch (const Error& e) {
  std::fprintf(stderr, "error: %s\n", e.what());
  return 1;
}
