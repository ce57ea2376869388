// Broadcast planning, the broadcast kernel and its gradient reduction against
// a naive multi-index reference, on 1 and 2 threads.
#include "artel/kernels/elementwise.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "artel/core/threads.h"

namespace artel::kernels {
namespace {

// Flat index of a right-aligned broadcast operand for output multi-index `idx`.
int64_t operand_index(const Shape& out, const Shape& s, const std::vector<int64_t>& idx) {
  int64_t flat = 0;
  size_t off = out.size() - s.size();
  for (size_t i = 0; i < s.size(); ++i) flat = flat * s[i] + (s[i] == 1 ? 0 : idx[i + off]);
  return flat;
}

std::vector<int64_t> unravel(int64_t f, const Shape& s) {
  std::vector<int64_t> idx(s.size());
  for (size_t i = s.size(); i-- > 0;) idx[i] = f % s[i], f /= s[i];
  return idx;
}

std::vector<float> ramp(int64_t n, float scale) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = scale * static_cast<float>((i * 7) % 11 + 1);
  return v;
}

void check_pair(const Shape& a, const Shape& b) {
  Shape out = broadcast_shape(a, b, "test");
  BroadcastPlan p = plan_broadcast(out, a, b);
  auto va = ramp(shape_numel(a), 0.5f), vb = ramp(shape_numel(b), 0.25f);
  std::vector<float> y(static_cast<size_t>(shape_numel(out)));
  binary(BinaryOp::div, p, va.data(), vb.data(), y.data());
  std::vector<double> ra(va.size(), 0.0);
  for (int64_t f = 0; f < shape_numel(out); ++f) {
    auto idx = unravel(f, out);
    int64_t ia = operand_index(out, a, idx), ib = operand_index(out, b, idx);
    ASSERT_FLOAT_EQ(y[static_cast<size_t>(f)], va[static_cast<size_t>(ia)] / vb[static_cast<size_t>(ib)])
        << shape_str(a) << " / " << shape_str(b) << " at " << f;
    ra[static_cast<size_t>(ia)] += y[static_cast<size_t>(f)];
  }
  std::vector<float> got(va.size(), -1.0f);
  sum_to(plan_broadcast(out, a, out), y.data(), got.data());
  for (size_t i = 0; i < ra.size(); ++i) ASSERT_NEAR(got[i], ra[i], 1e-4 * std::abs(ra[i]) + 1e-4) << shape_str(a);
}

TEST(Elementwise, BiasLikeOperandMergesIntoRows) {
  BroadcastPlan p = plan_broadcast({4, 5, 6}, {4, 5, 6}, {6});
  ASSERT_EQ(p.ndim, 2);
  EXPECT_EQ(p.shape[0], 20);
  EXPECT_EQ(p.stride_b[0], 0);
  EXPECT_EQ(p.stride_b[1], 1);
  BroadcastPlan same = plan_broadcast({4, 5, 6}, {4, 5, 6}, {4, 5, 6});
  EXPECT_EQ(same.ndim, 1);
}

TEST(Elementwise, BroadcastMatchesNaiveReference) {
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    check_pair({2, 3, 4}, {2, 3, 4});
    check_pair({2, 3, 4}, {4});
    check_pair({4}, {2, 3, 4});
    check_pair({2, 1, 4}, {2, 3, 4});
    check_pair({2, 3, 4}, {3, 1});
    check_pair({3, 1}, {1, 4});
    check_pair({}, {2, 3});
    check_pair({2, 3}, {});
    check_pair({5, 1, 3, 1}, {1, 4, 1, 2});
    check_pair({64, 300}, {300});    // large enough to split over threads
    check_pair({300, 64}, {300, 1});
    check_pair({12, 64, 32}, {64, 32});
  }
  set_num_threads(1);
}

TEST(Elementwise, IncompatibleShapesNameTheOp) {
  try {
    broadcast_shape({2, 3}, {4}, "add");
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("add: shapes [2, 3] and [4]"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace artel::kernels
