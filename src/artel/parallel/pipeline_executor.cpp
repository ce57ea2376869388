#include "artel/parallel/pipeline_executor.h"

#include <algorithm>
#include <map>
#include <vector>

#include "artel/core/error.h"
#include "artel/core/overloaded.h"
#include "artel/core/trace.h"

namespace artel::parallel {

namespace {

int peer(const comm::ProcessGroup& g) { return 1 - g.rank(); }

// A hand-over is a header, then its tensors, each message tagged by the
// micro-batch and its place: header [count, then per tensor dtype, rank,
// dims...], fixed size, so the receiver learns what comes without knowing
// the stage's code, and whether a gradient will come back for each.
constexpr int64_t kMaxTensors = 7, kMaxDims = 6, kSlot = 3 + kMaxDims;
constexpr int64_t kSlotHeaderWords = 1 + kMaxTensors * kSlot;
int tag_of(int mb, int64_t part) { return mb * static_cast<int>(kMaxTensors + 1) + static_cast<int>(part); }

struct HandOver {
  std::vector<Tensor> tensors;
  std::vector<bool> grads;  // per tensor: its gradient goes back upstream
};

Tensor header_of(const HandOver& h) {
  const std::vector<Tensor>& ts = h.tensors;
  ARTEL_CHECK(static_cast<int64_t>(ts.size()) <= kMaxTensors, "pipeline: a stage hands over ", ts.size(),
              " tensors, at most ", kMaxTensors);
  Tensor out = Tensor::zeros({kSlotHeaderWords}, DType::i64);
  int64_t* w = out.data<int64_t>();
  w[0] = static_cast<int64_t>(ts.size());
  for (size_t i = 0; i < ts.size(); ++i) {
    int64_t* slot = w + 1 + static_cast<int64_t>(i) * kSlot;
    ARTEL_CHECK(ts[i].dim() <= kMaxDims, "pipeline: a handed-over tensor has ", ts[i].dim(), " dimensions, at most ",
                kMaxDims);
    slot[0] = static_cast<int64_t>(ts[i].dtype());
    slot[1] = i < h.grads.size() && h.grads[i];
    slot[2] = ts[i].dim();
    for (int64_t d = 0; d < ts[i].dim(); ++d) slot[3 + d] = ts[i].size(d);
  }
  return out;
}

HandOver receive_all(comm::ProcessGroup& g, int mb) {
  Tensor h = Tensor::empty({kSlotHeaderWords}, DType::i64);
  g.recv(h, peer(g), tag_of(mb, 0))->wait();
  const int64_t* w = h.data<int64_t>();
  HandOver out;
  for (int64_t i = 0; i < w[0]; ++i) {
    const int64_t* slot = w + 1 + i * kSlot;
    Tensor t = Tensor::empty(Shape(slot + 3, slot + 3 + slot[2]), static_cast<DType>(slot[0]));
    g.recv(t, peer(g), tag_of(mb, 1 + i))->wait();
    out.tensors.push_back(t);
    out.grads.push_back(slot[1] != 0);
  }
  return out;
}

void send_all(comm::ProcessGroup& g, int mb, const HandOver& h, std::vector<comm::WorkPtr>& sends) {
  sends.push_back(g.send(header_of(h), peer(g), tag_of(mb, 0)));
  for (size_t i = 0; i < h.tensors.size(); ++i)
    sends.push_back(g.send(h.tensors[i], peer(g), tag_of(mb, 1 + static_cast<int64_t>(i))));
}

bool carries_gradient(const Variable& v) { return v.defined() && v.requires_grad(); }

// Backward from several outputs at once, each with its gradient: one node
// whose backward hands each output its gradient, so shared parts of the
// graph are walked once.
void backward_from(const Activations& outputs, const std::vector<Tensor>& grads) {
  Activations roots;
  std::vector<Tensor> seeds;
  for (size_t i = 0; i < outputs.size(); ++i)
    if (carries_gradient(outputs[i])) roots.push_back(outputs[i]), seeds.push_back(grads.at(i));
  if (roots.size() == 1) return roots[0].backward(seeds[0]);
  if (roots.empty()) return;
  autograd::make_result(Tensor::zeros({}), roots, "pipeline_hand_over",
                        [seeds](const Tensor&, std::vector<Tensor>& gi) {
                          for (size_t i = 0; i < gi.size(); ++i) gi[i] = seeds[i];
                        })
      .backward();
}

}  // namespace

PipelineExecutor::PipelineExecutor(int stage, int stages, PipelineLinks links, int chunks)
    : stage_(stage), stages_(stages), chunks_(chunks), links_(std::move(links)) {
  ARTEL_CHECK(stages >= 1 && stage >= 0 && stage < stages, "pipeline executor: stage ", stage, " of ", stages);
  ARTEL_CHECK(chunks >= 1 && (chunks == 1 || stages >= 2), "pipeline executor: ", chunks, " model chunks a stage over ",
              stages, " stage(s); interleaving needs at least 2 stages");
  auto check = [&](const std::shared_ptr<comm::ProcessGroup>& g, bool needed, const char* what) {
    ARTEL_CHECK(!needed || (g && g->size() == 2), "pipeline executor: stage ", stage, " of ", stages, " needs a two-rank ",
                what, " group", chunks > 1 ? " (the interleaved schedule's stages form a ring)" : "");
  };
  const bool ring = chunks > 1;
  check(links_.activations_from_prev, stage > 0 || ring, "activations-from-previous-stage");
  check(links_.grads_to_prev, stage > 0 || ring, "gradients-to-previous-stage");
  check(links_.activations_to_next, stage < stages - 1 || ring, "activations-to-next-stage");
  check(links_.grads_from_next, stage < stages - 1 || ring, "gradients-from-next-stage");
}

comm::ProcessGroup& PipelineExecutor::link(const std::shared_ptr<comm::ProcessGroup>& g, const char* what) const {
  ARTEL_CHECK(g != nullptr, "pipeline stage ", stage_, " of ", stages_, ": ", what, " goes past the end of the pipeline");
  return *g;
}

PipelineRunStats PipelineExecutor::run(const Schedule& schedule, const StageFunctions& fns) {
  ARTEL_CHECK(static_cast<bool>(fns.forward), "pipeline executor: no forward function");
  int forwards = 0;
  for (const Instruction& ins : schedule) forwards += std::holds_alternative<Forward>(ins);
  // Instruction numbers are chunk·M + micro-batch (Note [Interleaved
  // instruction numbers]); every schedule runs each micro-batch once through
  // each chunk.
  const int M = std::max(1, forwards / chunks_);
  auto chunk_of = [&](int n) { return chunks_ == 1 ? 0 : n / M; };
  // Each chunk's last backward syncs (Megatron's per-chunk grad sync): that
  // is when its parameters' gradients are whole, and the other chunks'
  // parameters take no part in it.
  std::vector<size_t> last_backward(static_cast<size_t>(chunks_), schedule.size());
  for (size_t i = 0; i < schedule.size(); ++i)
    if (const auto* b = std::get_if<Backward>(&schedule[i])) last_backward[static_cast<size_t>(chunk_of(b->micro_batch))] = i;
  auto first_virtual = [&](int n) { return stage_ == 0 && chunk_of(n) == 0; };
  auto last_virtual = [&](int n) { return stage_ == stages_ - 1 && chunk_of(n) == chunks_ - 1; };
  // On stage 0 a message is numbered after the last stage's chunk, one below its own.
  const int wrap = stage_ == 0 && chunks_ > 1 ? M : 0;

  std::map<int, InFlight> live;                          // by number: forward done, backward not yet
  std::map<int, HandOver> activations, gradients;        // received, not yet consumed
  std::vector<comm::WorkPtr> sends;                      // each keeps its tensor alive until done
  PipelineRunStats stats;
  auto find = [&](int n, const char* what) -> InFlight& {
    auto it = live.find(n);
    ARTEL_CHECK(it != live.end(), "pipeline stage ", stage_, ": ", what, " of micro-batch ", n, " before its forward");
    return it->second;
  };
  auto take = [&](std::map<int, HandOver>& received, int n, const char* what) {
    auto it = received.find(n);
    ARTEL_CHECK(it != received.end(), "pipeline stage ", stage_, ": ", what, " of micro-batch ", n,
                " before its hand-over arrived");
    HandOver h = std::move(it->second);
    received.erase(it);
    return h;
  };
  for (size_t i = 0; i < schedule.size(); ++i) {
    std::visit(
        Overloaded{
            [&](const RecvActivation& r) {
              activations[r.micro_batch] =
                  receive_all(link(links_.activations_from_prev, "receiving an activation"), r.micro_batch);
            },
            [&](const Forward& f) {
              const int n = f.micro_batch;
              trace::Scope span("forward", "compute", "compute", n);
              InFlight& slot = live[n];
              if (!first_virtual(n)) {
                HandOver h = take(activations, n - wrap, "forward");
                for (size_t k = 0; k < h.tensors.size(); ++k)
                  slot.inputs.emplace_back(h.tensors[k], autograd::grad_enabled() && h.grads[k]);
              }
              slot.outputs = fns.forward(n - chunk_of(n) * M, chunk_of(n), slot.inputs);
              stats.peak_live_micro_batches = std::max(stats.peak_live_micro_batches, static_cast<int>(live.size()));
              if (!autograd::grad_enabled() && last_virtual(n)) live.erase(n);  // nothing to keep
            },
            [&](const SendActivation& s) {
              InFlight& slot = find(s.micro_batch, "sending the activation");
              HandOver h;
              for (const Variable& v : slot.outputs) h.tensors.push_back(v.value()), h.grads.push_back(carries_gradient(v));
              send_all(link(links_.activations_to_next, "sending an activation"), s.micro_batch, h, sends);
              if (!autograd::grad_enabled()) live.erase(s.micro_batch);  // evaluation: no backward will come
            },
            [&](const RecvGrad& r) {
              gradients[r.micro_batch] = receive_all(link(links_.grads_from_next, "receiving a gradient"), r.micro_batch);
            },
            [&](const Backward& b) {
              const int n = b.micro_batch;
              trace::Scope span("backward", "compute", "compute", n);
              InFlight& slot = find(n, "backward");
              const bool syncs = i == last_backward[static_cast<size_t>(chunk_of(n))];
              std::shared_ptr<void> local_only = !syncs && fns.no_sync ? fns.no_sync() : nullptr;
              if (last_virtual(n)) {
                ARTEL_CHECK(slot.outputs.size() == 1, "pipeline: the last stage must return the loss alone, got ",
                            slot.outputs.size(), " tensors");
                slot.outputs[0].backward();
              } else {
                // The gradients come for the float outputs, in order; the others get none.
                std::vector<Tensor> g = take(gradients, n, "backward").tensors, grads(slot.outputs.size());
                size_t next = 0;
                for (size_t k = 0; k < slot.outputs.size(); ++k)
                  if (carries_gradient(slot.outputs[k])) {
                    ARTEL_CHECK(next < g.size(), "pipeline stage ", stage_, ": too few gradients for micro-batch ", n);
                    grads[k] = g[next++];
                  }
                backward_from(slot.outputs, grads);
              }
              slot.outputs.clear();  // frees the graph of this micro-batch
              if (first_virtual(n)) live.erase(n);
            },
            [&](const SendGrad& s) {
              const int n = s.micro_batch + wrap;
              InFlight& slot = find(n, "sending the input gradient");
              HandOver grads;
              for (const Variable& in : slot.inputs)
                if (carries_gradient(in))  // an input the stage did not use gets a zero gradient
                  grads.tensors.push_back(in.grad().defined() ? in.grad() : Tensor::zeros(in.shape()));
              send_all(link(links_.grads_to_prev, "sending a gradient"), s.micro_batch, grads, sends);
              live.erase(n);
            },
            [&](const OptimizerStep&) {},
        },
        schedule[i]);
  }
  for (auto& w : sends) w->wait();
  return stats;
}

}  // namespace artel::parallel
