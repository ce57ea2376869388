#include "artel/parallel/interleaved_schedule.h"

#include <algorithm>

#include "artel/core/error.h"

namespace artel::parallel {

namespace {

struct Unit {
  int chunk, micro_batch;
};

Unit forward_unit(int k, int stages, int chunks) {
  return {(k / stages) % chunks, (k / (stages * chunks)) * stages + k % stages};
}

Unit backward_unit(int k, int stages, int chunks) {
  Unit u = forward_unit(k, stages, chunks);
  u.chunk = chunks - 1 - u.chunk;
  return u;
}

class Builder {
 public:
  Builder(int micro_batches, int stages, int chunks, int stage)
      : m_(micro_batches), p_(stages), v_(chunks), s_(stage) {}

  void forward(Unit u) {
    const int virtual_stage = u.chunk * p_ + s_;
    if (virtual_stage > 0) {
      const int sender_chunk = s_ == 0 ? u.chunk - 1 : u.chunk;
      out_.emplace_back(RecvActivation{id(sender_chunk, u.micro_batch), previous()});
    }
    out_.emplace_back(Forward{id(u.chunk, u.micro_batch)});
    if (virtual_stage < p_ * v_ - 1) out_.emplace_back(SendActivation{id(u.chunk, u.micro_batch), next()});
  }

  void backward(Unit u) {
    const int virtual_stage = u.chunk * p_ + s_;
    if (virtual_stage < p_ * v_ - 1) out_.emplace_back(RecvGrad{id(u.chunk, u.micro_batch), next()});
    out_.emplace_back(Backward{id(u.chunk, u.micro_batch)});
    if (virtual_stage > 0) {
      const int receiver_chunk = s_ == 0 ? u.chunk - 1 : u.chunk;
      out_.emplace_back(SendGrad{id(receiver_chunk, u.micro_batch), previous()});
    }
  }

  Schedule finish() {
    out_.emplace_back(OptimizerStep{});
    return take();
  }
  Schedule take() { return std::move(out_); }

 private:
  int id(int chunk, int micro_batch) const { return chunk * m_ + micro_batch; }
  int next() const { return (s_ + 1) % p_; }
  int previous() const { return (s_ + p_ - 1) % p_; }

  int m_, p_, v_, s_;
  Schedule out_;
};

}  // namespace

Schedule interleaved_one_f_one_b(int micro_batches, int stages, int chunks, int stage) {
  ARTEL_CHECK(
      stages >= 2 && chunks >= 1 && stage >= 0 && stage < stages && micro_batches >= 1 && micro_batches % stages == 0,
      "interleaved schedule: needs stages >= 2, chunks >= 1, 0 <= stage < stages and micro-batches a ",
      "multiple of stages; got M=", micro_batches, " P=", stages, " V=", chunks, " stage=", stage);
  const int units = micro_batches * chunks;
  const int warmup = std::min(units, 2 * (stages - stage - 1) + (chunks - 1) * stages);
  Builder b(micro_batches, stages, chunks, stage);
  for (int k = 0; k < warmup; ++k) b.forward(forward_unit(k, stages, chunks));
  for (int k = 0; k < units - warmup; ++k) {
    b.forward(forward_unit(warmup + k, stages, chunks));
    b.backward(backward_unit(k, stages, chunks));
  }
  for (int k = units - warmup; k < units; ++k) b.backward(backward_unit(k, stages, chunks));
  return b.finish();
}

std::vector<Schedule> interleaved_all_stages(int micro_batches, int stages, int chunks) {
  std::vector<Schedule> out;
  for (int s = 0; s < stages; ++s) out.push_back(interleaved_one_f_one_b(micro_batches, stages, chunks, s));
  return out;
}

// Every stage takes the units in the same order, micro-batches in groups of
// P as in training (chunk 0 of the group's micro-batches, then chunk 1, ...;
// the last group may be smaller), and a unit's input comes from a unit no
// later in that order (the same one on the previous stage, or on stage 0
// the previous chunk's, a group's width earlier): with eager sends no stage
// waits for one that waits for it, and by the time stage 0 starts a group's
// next chunk its first micro-batch is back round the ring.
Schedule interleaved_forward_only(int micro_batches, int stages, int chunks, int stage) {
  ARTEL_CHECK(stages >= 2 && chunks >= 1 && stage >= 0 && stage < stages && micro_batches >= 1,
              "interleaved evaluation: needs stages >= 2, chunks >= 1, 0 <= stage < stages and micro-batches >= 1; "
              "got M=", micro_batches, " P=", stages, " V=", chunks, " stage=", stage);
  Builder b(micro_batches, stages, chunks, stage);
  for (int group = 0; group < micro_batches; group += stages)
    for (int c = 0; c < chunks; ++c)
      for (int mb = group; mb < std::min(micro_batches, group + stages); ++mb) b.forward({c, mb});
  return b.take();
}

}  // namespace artel::parallel
