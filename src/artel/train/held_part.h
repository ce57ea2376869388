// HeldPart: a region of one whole (single-worker-named) tensor that one
// worker holds, and what a sharded checkpoint is made of. Every strategy
// lists the parts it writes and the parts it wants back (strategy.h); the
// checkpoint stores each part once and any later layout reads what overlaps
// its own (checkpoint_reader.h), as PyTorch DCP's save and load plans do.
//
// Note [Regions of a whole tensor]
// A part is described in two steps, the two ways artel divides a parameter:
//   1. nn::take_part(whole, split, part, parts): the tensor-parallel part
//      (nn/split.h; Split{} or parts = 1: the whole tensor), then flattened;
//   2. elements [range.begin, range.end) of that (a ZeRO shard: the
//      elements a sharded optimizer owns, optim::Optimizer::owned).
// So a replicated weight written whole is {Split{}, 0, 1, [0, numel)}; the
// left half of a column-parallel weight's rows on tensor-parallel rank 0 is
// {rows, 0, 2, [0, numel/2)}; data-parallel rank 1's block of it under
// --zero 1 is a sub-range of that. A ZeRO-3 rank holding a flat range of
// each parameter is {Split{}, 0, 1, its range}. `data` always holds
// range.size() elements in that order.
//
// Keys: "model/<parameter>", "optim/<kind>.<parameter>" (f32, the
// parameter's shape) and "optim/step.<parameter>" (i64, shape {}).
//
//   std::vector<HeldPart> mine = parts_to_write(holdings, optimizer);  // alias live tensors
//   std::vector<HeldPart> want = parts_to_read(holdings, optimizer);   // weights in place, state fresh
//   ... a reader fills want[i].data where found[i] ...
//   load_optimizer_parts(want, found, optimizer);
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "artel/core/tensor.h"
#include "artel/nn/split.h"
#include "artel/optim/optimizer.h"

namespace artel::train {

inline constexpr const char* kModelKey = "model/";
inline constexpr const char* kOptimKey = "optim/";
inline constexpr const char* kStepKind = "step";

struct HeldPart {
  std::string key;            // "model/<name>", "optim/<kind>.<name>"
  DType dtype = DType::f32;
  Shape whole;                // the whole tensor's shape
  nn::Split split;            // its tensor-parallel split (Split{}: whole)
  int part = 0, parts = 1;    // which part of how many
  optim::ElementRange range;  // elements of the flattened part
  Tensor data;                // range.size() elements
  // Reading: a tensor of another dtype or shape in the checkpoint counts as
  // absent, not as an Error. For state that belongs to a setting a resumed
  // run may change (PowerSGD's Q, whose columns are --powersgd-rank).
  bool absent_if_different = false;

  // The shape of take_part(whole, split, part, parts).
  Shape part_shape() const;
  // Split{} when parts == 1 (the part is then the whole tensor): two parts
  // of the same region compare equal however they were declared.
  nn::Split region_split() const { return parts == 1 ? nn::Split{} : split; }
};

// How one worker holds one parameter, and which of its elements it writes.
struct ParameterHolding {
  std::string name;                 // the single-worker name
  Tensor value;                     // this worker's part of it
  Shape whole;
  nn::Split split;
  int part = 0, parts = 1;
  optim::ElementRange weights;      // elements of the flat part this worker writes ({0, 0}: none)
  bool writes_state = false;        // its optimizer state: the owned elements
  bool writes_step = false;         // its step count (one worker per parameter)
};

// The parts `holdings` say this worker writes: weights as views of the
// live values, optimizer state as the optimizer's own buffers (a
// parameter not updated yet has none), step counts as fresh scalars.
std::vector<HeldPart> parts_to_write(const std::vector<ParameterHolding>& holdings, const optim::Optimizer& optimizer);

// Buffers of the model ("model/<name>", like its weights: the model's state
// dict) as whole parts that alias them: written as they are, read in place.
std::vector<HeldPart> buffer_parts(const std::vector<std::pair<std::string, Tensor>>& buffers);

// What this worker reads back: every parameter's part whole, into its live
// value; the optimizer state of its owned elements and every step count,
// into fresh tensors for load_optimizer_parts.
std::vector<HeldPart> parts_to_read(const std::vector<ParameterHolding>& holdings, const optim::Optimizer& optimizer);

// Hands the optimizer the state read into `parts` (found[i]: part i was in
// the checkpoint): a parameter without a step count starts afresh. Throws
// naming a weight that was missing, or state without a step count.
void load_optimizer_parts(const std::vector<HeldPart>& parts, const std::vector<bool>& found,
                          optim::Optimizer& optimizer, const std::string& source);

}  // namespace artel::train
