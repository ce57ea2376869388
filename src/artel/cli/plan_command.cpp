// `artel plan`: predict the step time and memory per worker of a layout of a
// model on a cluster (plan/step_model.h), or rank every valid layout
// (--search). The model is a GPT — `artel train`'s own (--model gpt: W2),
// a preset, both from the definitions `artel train` uses
// (train::default_config, train::apply_preset), or its dimensions — or
// per-layer costs: measured on another model `artel train` builds (--model
// wordlm|mlp|cnn, plan/measured_costs.h) or a user's (--model-costs
// FILE.json); the cluster is a JSON file (data/clusters/selene.json;
// docs/PLAN.md).
//
//   artel plan --model gpt --cluster data/clusters/selene.json --workers 8 --global-batch 96
//   artel plan --preset gpt2 --cluster data/clusters/selene.json --workers 8 --global-batch 64 --tp 2
//   artel plan --preset gpt2 --cluster c.json --global-batch 64 --search --top 10 --json
#include <CLI/CLI.hpp>
#include <iostream>
#include <optional>

#include "artel/cli/command.h"
#include "artel/cli/parse_flags.h"
#include "artel/cli/plan_calibrate.h"
#include "artel/cli/planned_run.h"
#include "artel/core/error.h"
#include "artel/models/model.h"
#include "artel/plan/layout_search.h"
#include "artel/plan/measured_costs.h"
#include "artel/plan/plan_report.h"
#include "artel/train/checkpoint_format.h"
#include "artel/train/train_config.h"

namespace artel::cli {
namespace {

struct PlanArgs {
  // model
  std::string model, preset, model_costs, save_model_costs, data;
  // Unset: the preset's or the run's default.
  std::optional<int64_t> n_layer, n_head, n_embd, seq, vocab, vocab_multiple;
  std::optional<double> dropout;
  // cluster and workload
  std::string cluster;
  int64_t workers = 0, global_batch = 0, threads = 0;
  std::string precision = "fp32", state = "artel", activations = "artel";
  bool no_grad_overlap = false, scatter_gather_sends = false, nccl_rings = false;
  // layout
  int64_t dp = 0, tp = 1, pp = 1, micro_batches = 1;
  std::optional<int64_t> chunks;  // unset: 2 for the interleaved schedule, else 1
  std::string schedule = "1f1b", recompute = "none", grad_compression = "none";
  int zero = 0;
  bool sequence_parallel = false;
  // output
  bool search = false, json = false;
  size_t top = 20;
  int powersgd_rank = 4;
};

// GPT-2's vocabulary, as `artel train` takes it for token files.
constexpr int64_t kGpt2Vocabulary = 50257;

// The data's vocabulary, as `artel train` reads it: --vocab; else GPT-2's
// tokens for a preset without --data (a preset is for token files); else
// --data's classes, or the bundled text's, which the run with no --data
// trains on (W2).
int64_t vocabulary_of(const PlanArgs& a, train::TrainConfig c) {
  if (a.vocab) {
    ARTEL_CHECK(*a.vocab >= 1 && *a.vocab <= (int64_t{1} << 24), "--vocab must be in [1, 16777216], got ", *a.vocab);
    return *a.vocab;
  }
  if (a.data.empty() && !a.preset.empty()) return kGpt2Vocabulary;
  c.data = a.data;
  return data_vocabulary(c);
}

// --model, the GPT (W2) when not given.
std::string model_kind(const PlanArgs& a) { return a.model.empty() ? "gpt" : a.model; }

// The run's config as `artel train` resolves it: its defaults for the model
// (gpt: W2), a preset applied over them (train::apply_preset), then --data
// and any dimension or dropout given.
train::TrainConfig run_config(const PlanArgs& a) {
  train::TrainConfig c = train::default_config(model_kind(a));
  train::apply_preset(c, a.preset);
  if (!a.data.empty()) c.data = a.data;
  c.n_layer = a.n_layer.value_or(c.n_layer);
  c.n_head = a.n_head.value_or(c.n_head);
  c.n_embd = a.n_embd.value_or(c.n_embd);
  c.block_size = a.seq.value_or(c.block_size);
  c.vocab_multiple = a.vocab_multiple.value_or(c.vocab_multiple);
  c.dropout = a.dropout.value_or(c.dropout);
  return c;
}

// A GPT, whose costs follow from its shape: neither a costs file nor a
// model whose costs are measured.
bool plans_a_gpt(const PlanArgs& a) { return a.model_costs.empty() && model_kind(a) == "gpt"; }

// Whether `artel train` accepts `l` for this model (TrainConfig::validate,
// the one definition of what it runs): the search under artel's accounting
// ranks only those.
bool artel_trains(const PlanArgs& a, const plan::Layout& l, const plan::Workload& w) {
  train::TrainConfig c = run_config(a);
  c.tp = l.tp;
  c.pp = l.pp;
  c.micro_batches = l.micro_batches;
  c.schedule = plan::schedule_name(l.schedule);
  c.chunks = l.chunks;
  c.zero = l.zero;
  c.recompute = plan::recompute_name(l.recompute);
  c.sequence_parallel = l.sequence_parallel;
  c.batch_size = w.global_batch / l.dp;
  const std::string compression = plan::compression_name(l.compression);
  c.grad_compression = compression.substr(0, compression.find(':'));
  if (l.compression.kind == plan::Compression::Kind::powersgd) c.powersgd_rank = l.compression.rank;
  try {
    c.validate();
  } catch (const Error&) {
    return false;
  }
  return true;
}

plan::ModelDescription model_of(const PlanArgs& a) {
  if (!a.model_costs.empty()) {
    ARTEL_CHECK(a.model.empty() && a.preset.empty() && !a.n_layer,
                "give --model-costs or a GPT (--model gpt, --preset, --n-layer ...), not both");
    return plan::read_model_costs(a.model_costs);
  }
  if (!plans_a_gpt(a)) {  // measured: any model `artel train` builds
    ARTEL_CHECK(a.preset.empty(), "--preset is a GPT's shape, not --model ", a.model, "'s");
    return measured_model(run_config(a));
  }
  require(!a.model.empty() || !a.preset.empty() || a.n_layer,
          "give --model gpt (W2), --preset gpt2, GPT dimensions (--n-layer, --n-head, --n-embd, --seq) or "
          "--model-costs FILE.json",
          "no model to plan");
  const train::TrainConfig c = run_config(a);
  c.validate();  // the shape `artel train` would refuse (a layer count of 0, dropout 2) is refused here too
  const std::string name = !a.preset.empty() ? a.preset : a.n_layer ? "gpt" : "gpt (W2)";
  return plan::transformer_model(name, gpt_shape(c, vocabulary_of(a, c)));
}

plan::Workload workload_of(const PlanArgs& a) {
  ARTEL_CHECK(a.global_batch >= 1, "--global-batch is required (sequences per optimizer step, >= 1)");
  plan::Workload w;
  w.global_batch = a.global_batch;
  w.precision = plan::parse_precision(a.precision);
  if (a.state == "artel") {  // what `artel train` keeps for the model (a costs file's: AdamW's)
    w.state = a.model_costs.empty() ? artel_state(run_config(a)) : plan::StateBytes::artel_adamw();
  } else if (a.state == "mixed") {
    w.state = plan::StateBytes::mixed_adamw();
  } else {
    throw Error("unknown --state '" + a.state + "'",
                "use artel (fp32 weights, gradients, AdamW: 4+4+8 bytes) or mixed (2+2+12)");
  }
  w.overlap_grad_reduce = !a.no_grad_overlap;
  w.scatter_gather_sends = a.scatter_gather_sends;
  w.dropout = plans_a_gpt(a) && run_config(a).dropout > 0;  // a measured model's masks are in its activations
  w.activations = plan::parse_activations(a.activations);
  w.cross_host = a.nccl_rings ? plan::CrossHost::rings : plan::CrossHost::hierarchical;
  w.tables_apart = !a.nccl_rings;  // artel's DDP; Megatron-LM's buckets its tied embedding with the rest
  ARTEL_CHECK(a.threads >= 0, "--threads must be >= 0 (0: the host's cores split over its workers), got ", a.threads);
  w.threads = a.threads;
  return w;
}

plan::Layout layout_of(const PlanArgs& a, int64_t workers) {
  plan::Layout l;
  l.tp = a.tp;
  l.pp = a.pp;
  ARTEL_CHECK(a.tp >= 1 && a.pp >= 1, "--tp and --pp must be >= 1");
  l.dp = a.dp ? a.dp : workers / (a.tp * a.pp);
  if (a.dp == 0) {
    require(workers % (a.tp * a.pp) == 0, "choose tp and pp whose product divides the worker count, or pass --dp",
            "tp·pp = ", a.tp * a.pp, " does not divide the ", workers, " workers");
  }
  l.micro_batches = a.micro_batches;
  l.schedule = plan::parse_schedule(a.schedule);
  l.chunks = a.chunks.value_or(l.schedule == plan::Schedule::interleaved ? 2 : 1);
  l.zero = a.zero;
  l.recompute = plan::parse_recompute(a.recompute);
  l.sequence_parallel = a.sequence_parallel;
  l.compression = plan::parse_compression(a.grad_compression, a.powersgd_rank);
  return l;
}

// Flags the plan would drop without a word are refused, as `artel train`'s
// are (train/setting_scope.h): a layout's flags with --search, which tries
// every layout; a GPT's dimensions for a model whose costs are measured or
// read; --threads on a cluster of whole devices; a PowerSGD rank nothing uses.
void refuse_flags_without_effect(const CLI::App& app, const PlanArgs& a, const plan::Cluster& cluster) {
  auto given = [&](const char* flag) { return app.get_option(flag)->count() > 0; };
  if (a.search)
    for (const char* flag : {"--dp", "--tp", "--pp", "--micro-batches", "--schedule", "--chunks", "--zero",
                             "--recompute", "--sequence-parallel", "--grad-compression"})
      if (given(flag))
        throw Error(std::string(flag) + " picks one layout, and --search ranks every layout",
                    std::string("drop ") + flag + ", or drop --search to predict that one layout");
  const char* shape[] = {"--n-layer", "--n-head", "--n-embd", "--seq", "--vocab", "--vocab-multiple", "--dropout"};
  if (!a.model_costs.empty()) {
    for (const char* flag : shape)
      if (given(flag)) throw Error(std::string(flag) + " shapes a GPT, and --model-costs gives the model whole", std::string("drop ") + flag);
    if (given("--data"))
      throw Error("--data gives a GPT its vocabulary, and --model-costs gives the model whole", "drop --data");
  } else if (!plans_a_gpt(a)) {  // measured on `artel train --model`'s own model and data
    for (const char* flag : shape) {
      const bool text_shape = models::trains_on_text(a.model) && std::string(flag) != "--vocab";
      if (given(flag) && !text_shape)
        throw Error(std::string(flag) + " would do nothing: " +
                        (models::trains_on_text(a.model) ? "--model " + a.model + "'s vocabulary is its --data's"
                                                         : "it shapes --model gpt or wordlm, not " + a.model),
                    std::string("drop ") + flag);
    }
  }
  if (given("--threads") && a.threads > 0 && cluster.cores_per_host.value <= 0)
    throw Error("--threads " + std::to_string(a.threads) + " would do nothing: cluster " + cluster.name +
                    "'s workers are whole devices (it gives no cores_per_host)",
                "drop --threads");
  if (given("--powersgd-rank") && !a.search && a.grad_compression != "powersgd")
    throw Error("--powersgd-rank " + std::to_string(a.powersgd_rank) + " would do nothing: it goes with "
                "--grad-compression powersgd or --search, and this plan has neither",
                "drop --powersgd-rank");
}

void add_flags(CLI::App& app, PlanArgs& a) {
  app.add_option("--model", a.model,
                 "gpt: the GPT `artel train` trains by default (W2: its shape and data); wordlm, mlp, cnn: "
                 "`artel train --model`'s, per-layer costs measured on its data");
  app.add_option("--preset", a.preset, "gpt2 (124M) or gpt2-medium (350M): `artel train --preset`'s shapes");
  app.add_option("--n-layer", a.n_layer, "GPT blocks (overrides the preset)");
  app.add_option("--n-head", a.n_head, "attention heads");
  app.add_option("--n-embd", a.n_embd, "model width");
  app.add_option("--seq", a.seq, "tokens per sequence (the block size)");
  app.add_option("--vocab", a.vocab,
                 "token ids, padded to --vocab-multiple [--data's; presets: GPT-2's 50,257; else the bundled text's]");
  app.add_option("--data", a.data, "the vocabulary of this data, read as `artel train --data` reads it");
  app.add_option("--dropout", a.dropout, "the GPT's dropout: > 0 keeps its masks (Megatron-LM's 0.1) [artel's 0]");
  app.add_option("--vocab-multiple", a.vocab_multiple, "pad the vocabulary to a multiple [gpt2 presets: 64]");
  app.add_option("--model-costs", a.model_costs, "a user's model as per-layer costs (JSON; docs/PLAN.md)");
  app.add_option("--save-model-costs", a.save_model_costs,
                 "write --model wordlm|mlp|cnn's measured per-layer costs as a --model-costs file");
  app.add_option("--cluster", a.cluster, "the cluster (JSON), e.g. data/clusters/selene.json")->required();
  app.add_option("--workers", a.workers, "use this many of the cluster's workers (whole hosts) [default all]");
  app.add_option("--global-batch", a.global_batch, "sequences per optimizer step")->required();
  app.add_option("--threads", a.threads,
                 "threads a worker runs on, CPU clusters only (cores_per_host) [0: the host's cores split over its "
                 "workers, as `artel train --nproc`]");
  app.add_option("--precision", a.precision, "fp32 | bf16: the matrix products' rate and activation size [fp32]");
  app.add_option("--state", a.state,
                 "artel (4+4 bytes a parameter and the run's optimizer's: AdamW 8, SGD with momentum 4) | mixed "
                 "(2+2+12, the ZeRO paper's) [artel]");
  app.add_option("--activations", a.activations,
                 "artel (what artel's autograd keeps; --search ranks only the layouts `artel train` accepts) | megatron "
                 "(Korthikanti et al. 2022's counts; every layout) [artel]");
  app.add_flag("--no-grad-overlap", a.no_grad_overlap,
               "data-parallel reductions only after backward (Megatron-LM 2021)");
  app.add_flag("--scatter-gather-sends", a.scatter_gather_sends, "pipeline sends split over tp (Megatron-LM)");
  app.add_flag("--nccl-rings", a.nccl_rings,
               "data parallelism across hosts as NCCL's rings side by side (Megatron-LM), not artel's hierarchical "
               "collectives");
  app.add_option("--dp", a.dp, "data-parallel degree [default workers / (tp·pp)]");
  app.add_option("--tp", a.tp, "tensor-parallel degree [1]");
  app.add_option("--pp", a.pp, "pipeline stages [1]");
  app.add_option("--micro-batches", a.micro_batches, "micro-batches per replica and step [1]");
  app.add_option("--schedule", a.schedule, "gpipe | 1f1b | interleaved [1f1b]");
  app.add_option("--chunks", a.chunks, "model chunks per stage, interleaved only [2]");
  app.add_option("--zero", a.zero, "ZeRO stage 0-3 [0]");
  app.add_option("--recompute", a.recompute, "none | selective | full [none]");
  app.add_flag("--sequence-parallel", a.sequence_parallel, "Megatron's sequence parallelism (with --tp)");
  app.add_option("--grad-compression", a.grad_compression, "none | bf16 | powersgd, as `artel train` takes it [none]");
  app.add_flag("--search", a.search, "rank every valid layout instead of predicting one");
  app.add_option("--top", a.top, "rows of the ranking to print [20]")->check(positive());
  app.add_option("--powersgd-rank", a.powersgd_rank, "PowerSGD's rank r (--search tries PowerSGD at it) [4]");
  app.add_flag("--json", a.json, "print JSON instead of text");
}

int run_plan(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "calibrate") return run_plan_calibrate(argc - 1, argv + 1);
  PlanArgs a;
  CLI::App app{"Predict the step time and memory of a layout on a cluster, or rank every layout.", "artel plan"};
  add_flags(app, a);
  app.footer(
      "examples:\n"
      "  artel plan --model gpt --cluster data/clusters/selene.json --workers 8 --global-batch 96\n"
      "  artel plan --preset gpt2 --cluster data/clusters/selene.json --workers 8 --global-batch 64 --tp 2 "
      "--micro-batches 4\n"
      "  artel plan --preset gpt2 --cluster data/clusters/selene.json --workers 16 --global-batch 64 --search --top "
      "10\n"
      "  artel plan calibrate --out this.json   (measure this machine: a cluster file with its rates)\n"
      "docs/PLAN.md explains the model of time and memory and the file formats.");
  if (!parse_flags(app, argc, argv, "see `artel plan --help`")) return 0;

  plan::Cluster cluster = plan::read_cluster(a.cluster);
  refuse_flags_without_effect(app, a, cluster);
  const plan::ModelDescription model = model_of(a);
  if (!a.save_model_costs.empty()) {
    ARTEL_CHECK(!plans_a_gpt(a) && a.model_costs.empty(),
                "--save-model-costs writes what --model wordlm|mlp|cnn measures; a GPT's costs follow from its shape");
    const std::string text =
        plan::model_costs_json(model, "measured by `artel plan --model " + a.model + "` on a batch of its data").dump(2) +
        "\n";
    train::write_atomically(a.save_model_costs,
                            [&](int fd, const std::string& tmp) { train::write_all(fd, text.data(), text.size(), tmp); });
  }
  if (a.workers) cluster = cluster.with_workers(a.workers);
  const plan::Workload workload = workload_of(a);

  if (a.search) {
    plan::SearchSpace space;
    if (workload.state.gradient > 2) space.compressions.push_back({plan::Compression::Kind::bf16, 0});
    space.compressions.push_back(plan::parse_compression("powersgd", a.powersgd_rank));
    std::vector<plan::Prediction> ranked = plan::search_layouts(model, cluster, workload, space);
    if (workload.activations == plan::Activations::artel && a.model_costs.empty())  // a model `artel train` builds
      std::erase_if(ranked, [&](const plan::Prediction& p) { return !artel_trains(a, p.layout, workload); });
    ARTEL_CHECK(!ranked.empty(), "no valid layout of ", model.name, " on ", cluster.workers(),
                " workers with global batch ", workload.global_batch,
                "; the batch must split over dp and micro-batches, tp divide the heads and pp the layers");
    if (a.json) {
      std::cout << plan::ranking_json(ranked, model, workload, a.top).dump(2) << "\n";
    } else {
      std::cout << ranked.size() << " valid layouts of " << model.name << " on " << cluster.workers()
                << " workers, global batch " << workload.global_batch << ", fastest first:\n"
                << plan::ranking_text(ranked, a.top);
    }
    return 0;
  }
  const plan::Prediction p = plan::predict(model, cluster, layout_of(a, cluster.workers()), workload);
  if (a.json) {
    std::cout << plan::prediction_json(p, model, workload).dump(2) << "\n";
  } else {
    std::cout << plan::prediction_text(p, model, cluster, workload);
  }
  return 0;
}

const bool kPlanRegistered = register_command(
    "plan",
    "predict a layout's step time and memory on a cluster; --search ranks every layout; `plan calibrate` measures "
    "this machine",
    run_plan);

}  // namespace
}  // namespace artel::cli
