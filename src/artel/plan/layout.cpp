#include "artel/plan/layout.h"

#include <algorithm>
#include <sstream>

#include "artel/core/error.h"

namespace artel::plan {

Schedule parse_schedule(const std::string& name) {
  if (name == "gpipe") return Schedule::gpipe;
  if (name == "1f1b") return Schedule::one_f_one_b;
  if (name == "interleaved") return Schedule::interleaved;
  throw Error("unknown pipeline schedule '" + name + "'", "use gpipe, 1f1b or interleaved");
}

const char* schedule_name(Schedule s) {
  switch (s) {
    case Schedule::gpipe: return "gpipe";
    case Schedule::one_f_one_b: return "1f1b";
    case Schedule::interleaved: return "interleaved";
  }
  return "?";
}

Recompute parse_recompute(const std::string& name) {
  if (name == "none") return Recompute::none;
  if (name == "selective") return Recompute::selective;
  if (name == "full") return Recompute::full;
  throw Error("unknown recompute mode '" + name + "'", "use none, selective or full");
}

Activations parse_activations(const std::string& name) {
  if (name == "megatron") return Activations::megatron;
  if (name == "artel") return Activations::artel;
  throw Error("unknown activation accounting '" + name + "'",
              "use artel (what artel's autograd keeps) or megatron (Korthikanti et al. 2022's counts)");
}

const char* activations_name(Activations a) { return a == Activations::artel ? "artel" : "megatron"; }

const char* recompute_name(Recompute r) {
  switch (r) {
    case Recompute::none: return "none";
    case Recompute::selective: return "selective";
    case Recompute::full: return "full";
  }
  return "?";
}

Compression parse_compression(const std::string& name, int powersgd_rank) {
  if (name == "none") return {};
  if (name == "bf16") return {Compression::Kind::bf16, 0};
  if (name == "powersgd") {
    ARTEL_CHECK(powersgd_rank >= 1, "--powersgd-rank must be >= 1, got ", powersgd_rank);
    return {Compression::Kind::powersgd, powersgd_rank};
  }
  throw Error("unknown gradient compression '" + name + "'", "use none, bf16 or powersgd (with --powersgd-rank R)");
}

std::string compression_name(const Compression& c) {
  switch (c.kind) {
    case Compression::Kind::none: return "none";
    case Compression::Kind::bf16: return "bf16";
    case Compression::Kind::powersgd: return "powersgd:" + std::to_string(c.rank);
  }
  return "?";
}

std::string describe(const Layout& l) {
  std::ostringstream os;
  os << "dp" << l.dp << " tp" << l.tp << " pp" << l.pp << " m" << l.micro_batches << " " << schedule_name(l.schedule);
  if (l.schedule == Schedule::interleaved) os << "x" << l.chunks;
  os << " zero" << l.zero << " recompute=" << recompute_name(l.recompute) << (l.sequence_parallel ? " sp" : "")
     << " grad=" << compression_name(l.compression);
  return os.str();
}

int64_t micro_batch_size(const Layout& l, const Workload& w) { return w.global_batch / (l.dp * l.micro_batches); }

namespace {

std::string join_degrees(const std::vector<int64_t>& degrees) {
  std::string out;
  for (int64_t d : degrees) out += (out.empty() ? "" : ", ") + std::to_string(d);
  return out;
}

}  // namespace

void validate_layout(const ModelDescription& model, const Layout& l, const Workload& w, int64_t workers) {
  ARTEL_CHECK(l.dp >= 1 && l.tp >= 1 && l.pp >= 1, "dp, tp and pp must be >= 1, got dp=", l.dp, " tp=", l.tp,
              " pp=", l.pp);
  require(l.dp * l.tp * l.pp == workers, "choose dp, tp and pp whose product is the worker count", "dp·tp·pp = ", l.dp,
          "·", l.tp, "·", l.pp, " = ", l.dp * l.tp * l.pp, " but the cluster has ", workers, " workers");
  ARTEL_CHECK(w.global_batch >= 1, "the global batch must be >= 1, got ", w.global_batch);
  ARTEL_CHECK(l.micro_batches >= 1, "--micro-batches must be >= 1, got ", l.micro_batches);
  require(w.global_batch % (l.dp * l.micro_batches) == 0,
          "choose micro-batches so that dp·micro-batches divides the global batch", "the global batch ", w.global_batch,
          " does not split into dp·micro-batches = ", l.dp, "·", l.micro_batches, " equal micro-batches");
  if (l.tp > 1 && model.transformer) {
    require(model.transformer->n_head % l.tp == 0, "choose a tp that divides n_head", "tp ", l.tp,
            " does not divide the ", model.transformer->n_head, " attention heads");
  } else if (l.tp > 1) {
    const std::vector<int64_t>& degrees = model.tensor_parallel_degrees;
    require(!degrees.empty(), "use --tp 1 (a model splits as its plan declares; a costs file lists its "
            "tensor_parallel_degrees)", model.name, " splits nothing over tensor-parallel ranks");
    require(std::find(degrees.begin(), degrees.end(), l.tp) != degrees.end(),
            detail::concat("choose a tp its split divides into: ", join_degrees(degrees)).c_str(), "tp ", l.tp,
            " does not divide ", model.name, "'s tensor-parallel split");
  }
  ARTEL_CHECK(!l.sequence_parallel || model.transformer.has_value(),
              "sequence parallelism needs the model's GPT dimensions");
  require(!l.sequence_parallel || l.tp > 1, "add --tp N, or drop --sequence-parallel",
          "sequence parallelism splits activations over the tensor-parallel ranks, and tp is 1");
  require(l.recompute != Recompute::selective || model.transformer.has_value() || model.recomputes_selectively(),
          "use --recompute none or full", "selective recomputation reruns a core the model marks (attention's), "
          "and ", model.name, "'s costs mark none");
  const int64_t layers = model.pipeline_layers();
  // A GPT's blocks split evenly; listed layers are cut where their parameters balance (listed_stage_layers).
  if (model.transformer)
    require(layers % l.pp == 0, "choose a pp that divides the number of layers", "pp ", l.pp,
            " does not divide the model's ", layers, " layers");
  else
    require(l.pp <= layers, "choose a pp of at most the layer count", "pp ", l.pp, " stages for the model's ", layers,
            " layers: every stage needs one");
  if (l.schedule == Schedule::interleaved) {
    ARTEL_CHECK(l.pp >= 2, "the interleaved schedule needs pp >= 2, got pp=", l.pp);
    ARTEL_CHECK(l.chunks >= 2, "the interleaved schedule needs chunks >= 2 per stage, got ", l.chunks);
    // A GPT's chunks take equal runs of blocks (Megatron's); listed layers are balanced (listed_stage_layers).
    if (model.transformer)
      ARTEL_CHECK(layers % (l.pp * l.chunks) == 0, "pp·chunks = ", l.pp * l.chunks, " does not divide the ", layers,
                  " layers");
    else
      ARTEL_CHECK(l.pp * l.chunks <= layers, "pp·chunks = ", l.pp * l.chunks, " chunks for the model's ", layers,
                  " layers: every chunk needs one");
    ARTEL_CHECK(l.micro_batches % l.pp == 0, "the interleaved schedule needs micro-batches (", l.micro_batches,
                ") to be a multiple of pp (", l.pp, "), as Megatron-LM's does");
  } else {
    ARTEL_CHECK(l.chunks == 1, "chunks > 1 needs the interleaved schedule");
  }
  ARTEL_CHECK(l.zero >= 0 && l.zero <= 3, "the ZeRO stage must be 0-3, got ", l.zero);
  require(l.zero < 3 || (l.tp == 1 && l.pp == 1), "use --tp 1 --pp 1 with --zero 3",
          "ZeRO stage 3 shards over data parallelism alone ", "(artel's --zero 3 is fully sharded data parallelism)");
  if (l.compression.kind == Compression::Kind::powersgd) {
    ARTEL_CHECK(l.compression.rank >= 1, "PowerSGD needs a rank >= 1");
    require(model.transformer.has_value(), "use --grad-compression none or bf16 for a model planned from per-layer costs",
            "PowerSGD compresses weight matrices, whose shapes only a GPT's ", "dimensions give");
    ARTEL_CHECK(l.zero <= 1, "PowerSGD all-reduces low-rank factors, so gradients cannot be sharded: ",
                "it needs ZeRO stage 0 or 1, got ", l.zero);
  }
}

}  // namespace artel::plan
