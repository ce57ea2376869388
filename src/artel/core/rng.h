// Rng: a counter-based generator (Philox4x32-10, as in PyTorch's CUDA generator
// and Random123). Its whole state is (seed, stream, counter), so any rank can
// draw the same stream as another, or its own, and a checkpoint stores three
// integers to resume bit-for-bit. Normal draws are Box-Muller through
// artel's own logarithm and cosine (Note [Machine-independent normals] in
// rng.cpp): the same bits on every machine, one at a time or in runs.
//
//   Rng rng(seed);                 // stream 0
//   Rng mine(seed, 1 + rank);      // an independent stream per rank
//   float z = rng.normal();
#pragma once

#include <array>
#include <cstdint>

namespace artel {

struct RngState {
  uint64_t seed = 0;
  uint64_t stream = 0;
  uint64_t counter = 0;  // blocks of four 32-bit words drawn so far
  uint32_t used = 4;     // words of the current block consumed (4 = none left)
};

class Rng {
 public:
  explicit Rng(uint64_t seed = 0, uint64_t stream = 0) { state_.seed = seed, state_.stream = stream; }

  uint32_t next_u32();
  uint64_t next_u64() { return (static_cast<uint64_t>(next_u32()) << 32) | next_u32(); }
  float uniform();  // [0, 1), 24 random bits
  float normal();   // N(0, 1), Box-Muller from two uniforms
  uint64_t below(uint64_t n);  // uniform in [0, n), unbiased

  const RngState& state() const { return state_; }
  void set_state(const RngState& s);

  // One Philox4x32-10 block: the pure function underneath.
  static std::array<uint32_t, 4> philox(uint64_t key, uint64_t hi, uint64_t lo);

  // Draws addressed by (seed, stream, index) alone: element `index` of a
  // stream is one Philox block, so a worker computes any element of a
  // parameter without drawing the ones before it (Note [Declared parameters]
  // in nn/module.h). uniform_at in [0, 1); normal_at N(0, 1) by Box-Muller.
  static float uniform_at(uint64_t seed, uint64_t stream, uint64_t index);
  static float normal_at(uint64_t seed, uint64_t stream, uint64_t index);
  // Draws first .. first + n − 1 of a stream into out: each the same bits
  // as its *_at, eight at a time (a model's initialisation draws hundreds
  // of millions).
  static void uniform_run(uint64_t seed, uint64_t stream, uint64_t first, int64_t n, float* out);
  static void normal_run(uint64_t seed, uint64_t stream, uint64_t first, int64_t n, float* out);

 private:
  RngState state_;
  std::array<uint32_t, 4> block_{};
};

}  // namespace artel
