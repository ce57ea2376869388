// matmul, linear, linear_add and linear_gelu: values against naive loops or
// the unfused ops, gradients by finite differences.
#include <gtest/gtest.h>

#include <algorithm>

#include "artel/autograd/ops.h"
#include "artel/core/memory_stats.h"
#include "artel/core/threads.h"
#include "artel/kernels/gemm.h"
#include "artel/kernels/gemm_bf16.h"
#include "artel/kernels/reduce.h"
#include "gradcheck.h"

namespace artel::autograd {
namespace {

using testing::gradcheck;
using testing::random_tensor;

TEST(Linear, ForwardMatchesNaive) {
  Tensor x = random_tensor({2, 3, 4}, 1), w = random_tensor({5, 4}, 2), b = random_tensor({5}, 3);
  Variable y = linear(Variable(x), Variable(w), Variable(b));
  ASSERT_EQ(y.shape(), (Shape{2, 3, 5}));
  for (int64_t r = 0; r < 6; ++r)
    for (int64_t o = 0; o < 5; ++o) {
      double s = b.data<float>()[o];
      for (int64_t i = 0; i < 4; ++i) s += x.data<float>()[r * 4 + i] * w.data<float>()[o * 4 + i];
      EXPECT_NEAR(y.value().data<float>()[r * 5 + o], s, 1e-5);
    }
}

TEST(Linear, Gradients) {
  auto op = [](std::vector<Variable>& in) { return linear(in[0], in[1], in[2]); };
  gradcheck(op, {random_tensor({2, 3, 4}, 1), random_tensor({5, 4}, 2), random_tensor({5}, 3)});
  gradcheck([](std::vector<Variable>& in) { return linear(in[0], in[1], Variable()); },
            {random_tensor({3, 4}, 4), random_tensor({2, 4}, 5)});
}

TEST(Linear, InputWithoutGradGetsNone) {
  Variable x(random_tensor({3, 4}, 1)), w(random_tensor({2, 4}, 2), true), b(random_tensor({2}, 3), true);
  sum(linear(x, w, b)).backward();
  EXPECT_FALSE(x.grad().defined());
  EXPECT_TRUE(w.grad().defined());
  EXPECT_FLOAT_EQ(b.grad().data<float>()[0], 3.0f);  // Σ over 3 rows of 1
}

TEST(LinearAdd, EqualsResidualPlusLinear) {
  Tensor x = random_tensor({2, 3, 4}, 1), w = random_tensor({5, 4}, 2), b = random_tensor({5}, 3);
  Tensor r = random_tensor({2, 3, 5}, 4);
  std::vector<float> fused = linear_add(Variable(x), Variable(w), Variable(b), Variable(r)).value().to_vector();
  std::vector<float> plain = add(Variable(r), linear(Variable(x), Variable(w), Variable(b))).value().to_vector();
  ASSERT_EQ(fused.size(), plain.size());
  for (size_t i = 0; i < fused.size(); ++i) EXPECT_NEAR(fused[i], plain[i], 1e-5) << "element " << i;
}

TEST(LinearAdd, Gradients) {
  auto op = [](std::vector<Variable>& in) { return linear_add(in[0], in[1], in[2], in[3]); };
  gradcheck(op, {random_tensor({2, 3, 4}, 1), random_tensor({5, 4}, 2), random_tensor({5}, 3),
                 random_tensor({2, 3, 5}, 4)});
  gradcheck([](std::vector<Variable>& in) { return linear_add(in[0], in[1], Variable(), in[2]); },
            {random_tensor({3, 4}, 5), random_tensor({2, 4}, 6), random_tensor({3, 2}, 7)});
  // The residual also feeds the product: both paths reach it.
  gradcheck([](std::vector<Variable>& in) { return linear_add(in[0], in[1], in[2], in[0]); },
            {random_tensor({3, 4}, 8), random_tensor({4, 4}, 9), random_tensor({4}, 10)});
}

TEST(LinearAdd, ResidualOfTheWrongShapeNamesTheOp) {
  Variable x(random_tensor({3, 4}, 1)), w(random_tensor({2, 4}, 2)), b(random_tensor({2}, 3));
  EXPECT_THROW(
      {
        try {
          linear_add(x, w, b, Variable(random_tensor({3, 4}, 4)));
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("linear_add: residual [3, 4] does not match the output [3, 2]"),
                    std::string::npos);
          throw;
        }
      },
      Error);
  EXPECT_THROW(linear_add(x, w, b, Variable()), Error);
}

TEST(LinearGelu, Gradients) {
  for (bool tanh : {false, true}) {
    gradcheck([tanh](std::vector<Variable>& in) { return linear_gelu(in[0], in[1], in[2], tanh); },
              {random_tensor({2, 3, 4}, 1), random_tensor({5, 4}, 2), random_tensor({5}, 3)});
    gradcheck([tanh](std::vector<Variable>& in) { return linear_gelu(in[0], in[1], Variable(), tanh); },
              {random_tensor({3, 4}, 4), random_tensor({2, 4}, 5)});
  }
}

struct Results {
  std::vector<float> y, dx, dw, db;
};

// y = fn(x, w, b) and the gradients of Σ y·c for a fixed c.
template <class Fn>
Results run(const Fn& fn, const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& c) {
  Variable vx(x.clone(), true), vw(w.clone(), true), vb(b.clone(), true);
  Variable y = fn(vx, vw, vb);
  sum(mul(y, Variable(c))).backward();
  return {y.value().to_vector(), vx.grad().to_vector(), vw.grad().to_vector(), vb.grad().to_vector()};
}

void expect_same(const Results& a, const Results& b) {
  EXPECT_EQ(a.y, b.y);
  EXPECT_EQ(a.dx, b.dx);
  EXPECT_EQ(a.dw, b.dw);
  EXPECT_EQ(a.db, b.db);
}

// The fused op is the two ops, bit for bit, in fp32 and under bf16 products
// (whose backward rounds dU and sums the bias gradient in one pass) on both
// of oneDNN's kernels (on gemm, exact GELU adds the bias itself), on one
// thread and split over two (the bias sums then in chunks), with columns not
// a multiple of 16.
TEST(LinearGelu, EqualsGeluOfLinearBitForBit) {
  std::vector<std::pair<kernels::GemmPrecision, kernels::Bf16Kernel>> cases = {
      {kernels::GemmPrecision::fp32, kernels::Bf16Kernel::automatic}};
  if (!kernels::bf16_instructions().empty())
    for (kernels::Bf16Kernel k : {kernels::Bf16Kernel::matmul, kernels::Bf16Kernel::gemm})
      cases.emplace_back(kernels::GemmPrecision::bf16, k);
  const Tensor x = random_tensor({4, 300, 24}, 1), w = random_tensor({40, 24}, 2), b = random_tensor({40}, 3);
  const Tensor c = random_tensor({4, 300, 40}, 4);
  for (auto [p, kernel] : cases)
    for (int threads : {1, 2})
      for (bool tanh : {false, true}) {
        kernels::set_gemm_precision(p);
        kernels::set_bf16_kernel(kernel);
        SCOPED_TRACE(::testing::Message() << kernels::to_string(p) << " (" << kernels::bf16_kernel_name() << "), "
                                          << threads << " thread(s), tanh " << tanh);
        set_num_threads(threads);
        const Results fused = run([&](auto& a, auto& w_, auto& b_) { return linear_gelu(a, w_, b_, tanh); }, x, w, b, c);
        const Results two = run([&](auto& a, auto& w_, auto& b_) {
          const Variable u = linear(a, w_, b_);
          return tanh ? gelu_tanh(u) : gelu(u);
        }, x, w, b, c);
        expect_same(fused, two);
      }
  kernels::set_bf16_kernel(kernels::Bf16Kernel::automatic);
  kernels::set_gemm_precision(kernels::GemmPrecision::fp32);
  set_num_threads(1);
}

// Under bf16 linear_gelu hands its result over rounded (Note [Rounded
// values]), made block by block: exactly the value's rounding, whatever the
// blocks and threads, so the linear layer that reads it, taking that
// rounding, gives the bits it gave rounding the value itself. fp32 hands
// over none.
TEST(LinearGelu, HandsItsResultOverRoundedUnderBf16) {
  if (kernels::bf16_instructions().empty()) GTEST_SKIP() << "no native bf16 on this CPU";
  const Tensor x = random_tensor({4, 300, 24}, 1), w = random_tensor({40, 24}, 2), b = random_tensor({40}, 3);
  const Tensor w2 = random_tensor({8, 40}, 5), b2 = random_tensor({8}, 6), c = random_tensor({4, 300, 8}, 4);
  for (int threads : {1, 2}) {
    SCOPED_TRACE(::testing::Message() << threads << " thread(s)");
    set_num_threads(threads);
    kernels::set_gemm_precision(kernels::GemmPrecision::bf16);
    const Variable h = linear_gelu(Variable(x), Variable(w), Variable(b), false);
    ASSERT_TRUE(h.rounded().defined());
    ASSERT_EQ(h.rounded().dtype(), DType::bf16);
    std::vector<uint16_t> expected(static_cast<size_t>(h.numel()));
    kernels::round_to_bf16(h.value().data<float>(), 1, h.numel(), h.numel(), expected.data());
    const uint16_t* got = static_cast<const uint16_t*>(h.rounded().raw());
    EXPECT_TRUE(std::equal(expected.begin(), expected.end(), got));
    const Variable vw2(w2), vb2(b2);
    const Results handed = run([&](auto& a, auto& w_, auto& b_) { return linear(linear_gelu(a, w_, b_, false), vw2, vb2); },
                               x, w, b, c);
    const Results rounded_again = run([&](auto& a, auto& w_, auto& b_) { return linear(gelu(linear(a, w_, b_)), vw2, vb2); },
                                      x, w, b, c);
    expect_same(handed, rounded_again);
    kernels::set_gemm_precision(kernels::GemmPrecision::fp32);
    EXPECT_FALSE(linear_gelu(Variable(x), Variable(w), Variable(b), false).rounded().defined());
  }
  set_num_threads(1);
}

// Under bf16 products dW reads x's rounding only, so the linear keeps that
// and not x: an input that nothing else reads (a layer norm's output) is
// freed when its maker lets go of it, and the gradients are the same.
TEST(Linear, UnderBf16KeepsItsInputsRoundingNotTheInput) {
  if (kernels::bf16_instructions().empty()) GTEST_SKIP() << "no native bf16 on this CPU";
  const Tensor x0 = random_tensor({64, 32}, 1), w0 = random_tensor({16, 32}, 2), g = random_tensor({64, 16}, 3);
  kernels::set_gemm_precision(kernels::GemmPrecision::bf16);
  Tensor kept_dw, freed_dw;
  for (bool keep : {true, false}) {
    Variable x(x0, true), w(w0, true);
    Variable in = mul(x, 1.0f);  // an op's result: 64 × 32 floats
    const Variable y = linear(in, w, Variable());
    const int64_t before = live_tensor_bytes();
    if (!keep) in = Variable();
    EXPECT_EQ(live_tensor_bytes(), before - (keep ? 0 : 64 * 32 * 4));
    y.backward(g);
    (keep ? kept_dw : freed_dw) = w.grad();
  }
  kernels::set_gemm_precision(kernels::GemmPrecision::fp32);
  EXPECT_TRUE(std::equal(kept_dw.data<float>(), kept_dw.data<float>() + kept_dw.numel(), freed_dw.data<float>()));
}

// Under bf16 products, a linear layer whose bias needs a gradient rounds dY
// and sums its columns in one pass (kernels::rounded_with_column_sums): dX
// and dW are the bits they are without a bias gradient, and db is
// column_sums's, for linear and linear_add, on 1 and 2 threads.
TEST(Linear, UnderBf16TheBiasGradientPassChangesNoBits) {
  if (kernels::bf16_instructions().empty()) GTEST_SKIP() << "no native bf16 on this CPU";
  const Tensor x0 = random_tensor({3, 256, 32}, 1), w0 = random_tensor({48, 32}, 2), b0 = random_tensor({48}, 3);
  const Tensor r0 = random_tensor({3, 256, 48}, 4), g = random_tensor({3, 256, 48}, 5);
  kernels::set_gemm_precision(kernels::GemmPrecision::bf16);
  for (int threads : {1, 2})
    for (bool residual : {false, true}) {
      SCOPED_TRACE(::testing::Message() << threads << " thread(s), residual " << residual);
      set_num_threads(threads);
      Tensor dx[2], dw[2], db;
      for (bool bias_grad : {false, true}) {
        Variable x(x0, true), w(w0, true), b(b0, bias_grad), r(r0, true);
        (residual ? linear_add(x, w, b, r) : linear(x, w, b)).backward(g);
        dx[bias_grad] = x.grad(), dw[bias_grad] = w.grad();
        if (bias_grad) db = b.grad();
      }
      EXPECT_TRUE(std::equal(dx[0].data<float>(), dx[0].data<float>() + dx[0].numel(), dx[1].data<float>()));
      EXPECT_TRUE(std::equal(dw[0].data<float>(), dw[0].data<float>() + dw[0].numel(), dw[1].data<float>()));
      std::vector<float> want(48);
      kernels::column_sums(3 * 256, 48, g.data<float>(), want.data());
      EXPECT_TRUE(std::equal(want.begin(), want.end(), db.data<float>()));
    }
  kernels::set_gemm_precision(kernels::GemmPrecision::fp32);
  set_num_threads(1);
}

// Note [Values made again]: an input that can be made again is not kept
// for dW (sequence parallelism's gathered tokens, made again by a gather):
// released, its bytes go at once, and backward makes it again for the same
// dW to the bit, for linear and linear_gelu, in fp32 and (where the CPU has
// it) bf16, where it is rounded again.
TEST(Linear, AnInputThatCanBeMadeAgainIsNotKeptForDw) {
  const Tensor x0 = random_tensor({64, 32}, 1), w0 = random_tensor({16, 32}, 2), g = random_tensor({64, 16}, 3);
  std::vector<kernels::GemmPrecision> precisions = {kernels::GemmPrecision::fp32};
  if (!kernels::bf16_instructions().empty()) precisions.push_back(kernels::GemmPrecision::bf16);
  for (kernels::GemmPrecision precision : precisions)
    for (bool gelu : {false, true}) {
      kernels::set_gemm_precision(precision);
      Tensor dw[2], dx[2];
      int64_t held[2];
      int made = 0;
      for (bool remade : {false, true}) {
        Variable x(x0, true), w(w0, true), b(random_tensor({16}, 4), true);
        const int64_t start = live_tensor_bytes();
        Variable in = mul(x, 1.0f);  // an op's result: 64 × 32 floats
        if (remade) in.set_remake([&made, &x0] { ++made; return x0.clone(); });  // x · 1, made again
        const Variable y = gelu ? linear_gelu(in, w, b) : linear(in, w, b);
        in = Variable();
        held[remade] = live_tensor_bytes() - start;  // what forward keeps for backward, and y
        y.backward(g);
        dw[remade] = w.grad(), dx[remade] = x.grad();
      }
      const bool bf16 = precision == kernels::GemmPrecision::bf16;  // kept: x rounded, 2 bytes an element
      EXPECT_EQ(held[0] - held[1], 64 * 32 * (bf16 ? 2 : 4)) << "gelu " << gelu << ", bf16 " << bf16;
      kernels::set_gemm_precision(kernels::GemmPrecision::fp32);
      EXPECT_EQ(made, 1);
      EXPECT_TRUE(std::equal(dw[0].data<float>(), dw[0].data<float>() + dw[0].numel(), dw[1].data<float>()));
      EXPECT_TRUE(std::equal(dx[0].data<float>(), dx[0].data<float>() + dx[0].numel(), dx[1].data<float>()));
    }
}

TEST(Matmul, ForwardAndGradients) {
  Tensor a = random_tensor({2, 3, 4}, 6), b = random_tensor({4, 5}, 7);
  Variable y = matmul(Variable(a), Variable(b));
  ASSERT_EQ(y.shape(), (Shape{2, 3, 5}));
  double s = 0;
  for (int64_t k = 0; k < 4; ++k) s += a.data<float>()[4 + k] * b.data<float>()[k * 5 + 2];
  EXPECT_NEAR(y.value().data<float>()[5 + 2], s, 1e-5);
  gradcheck([](std::vector<Variable>& in) { return matmul(in[0], in[1]); }, {a, b});
}

TEST(Linear, BadShapesNameTheOp) {
  Variable x(random_tensor({3, 4}, 1)), w(random_tensor({2, 5}, 2));
  EXPECT_THROW(
      {
        try {
          linear(x, w, Variable());
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("linear: input [3, 4] does not match weight [2, 5]"), std::string::npos);
          throw;
        }
      },
      Error);
  EXPECT_THROW(linear(Variable(random_tensor({3, 5}, 1)), w, Variable(random_tensor({3}, 1))), Error);
  EXPECT_THROW(matmul(x, Variable(random_tensor({5, 2}, 1))), Error);
}

}  // namespace
}  // namespace artel::autograd
