#include "artel/parallel/pipeline_executor.h"

#include <map>
#include <vector>

#include "artel/core/error.h"
#include "artel/core/overloaded.h"
#include "artel/core/trace.h"

namespace artel::parallel {

namespace {

int peer(const comm::ProcessGroup& g) { return 1 - g.rank(); }

}  // namespace

PipelineExecutor::PipelineExecutor(int stage, int stages, PipelineLinks links, Shape activation)
    : stage_(stage), stages_(stages), links_(std::move(links)), activation_(std::move(activation)) {
  ARTEL_CHECK(stages >= 1 && stage >= 0 && stage < stages, "pipeline executor: stage ", stage, " of ", stages);
  auto check = [&](const std::shared_ptr<comm::ProcessGroup>& g, bool needed, const char* what) {
    ARTEL_CHECK(!needed || (g && g->size() == 2), "pipeline executor: stage ", stage, " of ", stages, " needs a two-rank ",
                what, " group");
  };
  check(links_.activations_from_prev, stage > 0, "activations-from-previous-stage");
  check(links_.grads_to_prev, stage > 0, "gradients-to-previous-stage");
  check(links_.activations_to_next, stage < stages - 1, "activations-to-next-stage");
  check(links_.grads_from_next, stage < stages - 1, "gradients-from-next-stage");
}

comm::ProcessGroup& PipelineExecutor::link(const std::shared_ptr<comm::ProcessGroup>& g, const char* what) const {
  ARTEL_CHECK(g != nullptr, "pipeline stage ", stage_, " of ", stages_, ": ", what, " goes past the end of the pipeline");
  return *g;
}

PipelineRunStats PipelineExecutor::run(const Schedule& schedule, const StageFunctions& fns) {
  ARTEL_CHECK(static_cast<bool>(fns.forward), "pipeline executor: no forward function");
  size_t last_backward = schedule.size();
  for (size_t i = 0; i < schedule.size(); ++i)
    if (std::holds_alternative<Backward>(schedule[i])) last_backward = i;

  std::map<int, InFlight> live;       // by micro-batch: forward done, backward not yet
  std::map<int, Tensor> received;     // activations / gradients received, not yet consumed
  std::vector<comm::WorkPtr> sends;   // each keeps its tensor alive until done
  PipelineRunStats stats;
  // An activation or its gradient (same shape) from the neighbour on `g`.
  auto receive = [&](comm::ProcessGroup& g, int mb) {
    Tensor t = Tensor::empty(fns.activation_shape ? fns.activation_shape(mb) : activation_);
    g.recv(t, peer(g), mb)->wait();
    received[mb] = t;
  };
  auto find = [&](int mb, const char* what) -> InFlight& {
    auto it = live.find(mb);
    ARTEL_CHECK(it != live.end(), "pipeline stage ", stage_, ": ", what, " of micro-batch ", mb, " before its forward");
    return it->second;
  };
  for (size_t i = 0; i < schedule.size(); ++i) {
    std::visit(
        Overloaded{
            [&](const RecvActivation& r) {
              receive(link(links_.activations_from_prev, "receiving an activation"), r.micro_batch);
            },
            [&](const Forward& f) {
              trace::Scope span("forward", "compute", "compute", f.micro_batch);
              InFlight& slot = live[f.micro_batch];
              if (stage_ > 0) {
                auto it = received.find(f.micro_batch);
                ARTEL_CHECK(it != received.end(), "pipeline stage ", stage_, ": forward of micro-batch ", f.micro_batch,
                            " before its activation arrived");
                slot.input = Variable(it->second, autograd::grad_enabled());
                received.erase(it);
              }
              slot.output = fns.forward(f.micro_batch, slot.input);
              stats.peak_live_micro_batches = std::max(stats.peak_live_micro_batches, static_cast<int>(live.size()));
              if (!autograd::grad_enabled() && stage_ == stages_ - 1) live.erase(f.micro_batch);  // nothing to keep
            },
            [&](const SendActivation& s) {
              comm::ProcessGroup& g = link(links_.activations_to_next, "sending an activation");
              InFlight& slot = find(s.micro_batch, "sending the activation");
              sends.push_back(g.send(slot.output.value(), peer(g), s.micro_batch));
              if (!autograd::grad_enabled()) live.erase(s.micro_batch);  // evaluation: no backward will come
            },
            [&](const RecvGrad& r) { receive(link(links_.grads_from_next, "receiving a gradient"), r.micro_batch); },
            [&](const Backward& b) {
              trace::Scope span("backward", "compute", "compute", b.micro_batch);
              InFlight& slot = find(b.micro_batch, "backward");
              std::shared_ptr<void> local_only = i != last_backward && fns.no_sync ? fns.no_sync() : nullptr;
              if (stage_ == stages_ - 1) {
                slot.output.backward();
              } else {
                auto it = received.find(b.micro_batch);
                ARTEL_CHECK(it != received.end(), "pipeline stage ", stage_, ": backward of micro-batch ", b.micro_batch,
                            " before its gradient arrived");
                slot.output.backward(it->second);
                received.erase(it);
              }
              slot.output = Variable();  // frees the graph of this micro-batch
              if (stage_ == 0) live.erase(b.micro_batch);
            },
            [&](const SendGrad& s) {
              comm::ProcessGroup& g = link(links_.grads_to_prev, "sending a gradient");
              InFlight& slot = find(s.micro_batch, "sending the input gradient");
              ARTEL_CHECK(slot.input.defined() && slot.input.grad().defined(), "pipeline stage ", stage_,
                          ": micro-batch ", s.micro_batch, " has no input gradient to send");
              sends.push_back(g.send(slot.input.grad(), peer(g), s.micro_batch));
              live.erase(s.micro_batch);
            },
            [&](const OptimizerStep&) {},
        },
        schedule[i]);
  }
  for (auto& w : sends) w->wait();
  return stats;
}

}  // namespace artel::parallel
