#include "artel/plan/interleaved_schedule.h"

#include <algorithm>

#include "artel/core/error.h"

namespace artel::plan {

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
      out_.emplace_back(parallel::RecvActivation{id(sender_chunk, u.micro_batch), previous()});
    }
    out_.emplace_back(parallel::Forward{id(u.chunk, u.micro_batch)});
    if (virtual_stage < p_ * v_ - 1) out_.emplace_back(parallel::SendActivation{id(u.chunk, u.micro_batch), next()});
  }

  void backward(Unit u) {
    const int virtual_stage = u.chunk * p_ + s_;
    if (virtual_stage < p_ * v_ - 1) out_.emplace_back(parallel::RecvGrad{id(u.chunk, u.micro_batch), next()});
    out_.emplace_back(parallel::Backward{id(u.chunk, u.micro_batch)});
    if (virtual_stage > 0) {
      const int receiver_chunk = s_ == 0 ? u.chunk - 1 : u.chunk;
      out_.emplace_back(parallel::SendGrad{id(receiver_chunk, u.micro_batch), previous()});
    }
  }

  parallel::Schedule finish() {
    out_.emplace_back(parallel::OptimizerStep{});
    return std::move(out_);
  }

 private:
  int id(int chunk, int micro_batch) const { return chunk * m_ + micro_batch; }
  int next() const { return (s_ + 1) % p_; }
  int previous() const { return (s_ + p_ - 1) % p_; }

  int m_, p_, v_, s_;
  parallel::Schedule out_;
};

}  // namespace

parallel::Schedule interleaved_one_f_one_b(int micro_batches, int stages, int chunks, int stage) {
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

std::vector<parallel::Schedule> interleaved_all_stages(int micro_batches, int stages, int chunks) {
  std::vector<parallel::Schedule> out;
  for (int s = 0; s < stages; ++s) out.push_back(interleaved_one_f_one_b(micro_batches, stages, chunks, s));
  return out;
}

}  // namespace artel::plan
