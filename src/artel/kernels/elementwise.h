// Elementwise arithmetic with numpy broadcasting, and its gradient reduction.
//
// A BroadcastPlan right-aligns the shapes, gives a broadcast dimension stride 0
// and merges neighbouring dimensions laid out alike, so (B, T, C) + (C) runs as
// (B·T, C) rows with b's row stride 0, and same-shape operands as one flat run.
// Inner loops are specialised on the last dimension's strides (0 or 1) and
// vectorise; rows are split over threads.
//
//   BroadcastPlan p = plan_broadcast(out_shape, a_shape, b_shape);
//   binary(BinaryOp::add, p, a, b, out);
//   // dL/db for a broadcast b: sum dL/dout over the dimensions b was repeated along
//   sum_to(plan_broadcast(out_shape, b_shape, out_shape), dout, db);
#pragma once

#include <cstdint>

#include "artel/core/tensor.h"

namespace artel::kernels {

enum class BinaryOp { add, sub, mul, div };

constexpr int kMaxDims = 8;

struct BroadcastPlan {
  int ndim = 0;  // after merging; >= 1
  int64_t shape[kMaxDims] = {};
  int64_t stride_a[kMaxDims] = {};
  int64_t stride_b[kMaxDims] = {};
  int64_t numel = 0;
};

// `out` must be the broadcast of `a` and `b` (see broadcast_shape); at most kMaxDims dims.
BroadcastPlan plan_broadcast(const Shape& out, const Shape& a, const Shape& b);

// The numpy broadcast of two shapes; throws artel::Error naming `op` if they do not broadcast.
Shape broadcast_shape(const Shape& a, const Shape& b, const char* op);

// out = a ∘ b elementwise under the plan; out is contiguous and must not alias a or b.
void binary(BinaryOp op, const BroadcastPlan& p, const float* a, const float* b, float* out);

// out = x · scale + shift (out may equal x).
void affine(int64_t n, const float* x, float scale, float shift, float* out);

// dst (the plan's operand a, stride 0 where it was broadcast) = sum of g (the
// plan's full output) over the broadcast positions. Overwrites dst.
void sum_to(const BroadcastPlan& p, const float* g, float* dst);

}  // namespace artel::kernels
