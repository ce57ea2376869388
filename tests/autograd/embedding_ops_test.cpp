// embedding (gather / scatter-add, tied weights) and dropout (mask from the Rng).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "artel/autograd/ops.h"
#include "gradcheck.h"

namespace artel::autograd {
namespace {

using testing::gradcheck;
using testing::random_tensor;

Tensor ids(const std::vector<int64_t>& v, const Shape& s) {
  Tensor t = Tensor::empty(s, DType::i64);
  for (size_t i = 0; i < v.size(); ++i) t.data<int64_t>()[i] = v[i];
  return t;
}

TEST(Embedding, GathersRowsAndScatterAddsGradients) {
  Tensor w = random_tensor({5, 3}, 1);
  Tensor id = ids({4, 0, 4, 2}, {2, 2});
  Variable vw(w, true);
  Variable y = embedding(vw, id);
  ASSERT_EQ(y.shape(), (Shape{2, 2, 3}));
  EXPECT_EQ(y.value().data<float>()[2 * 3 + 1], w.data<float>()[4 * 3 + 1]);
  sum(y).backward();
  EXPECT_EQ(vw.grad().data<float>()[4 * 3], 2.0f);  // id 4 used twice
  EXPECT_EQ(vw.grad().data<float>()[1 * 3], 0.0f);
  gradcheck([id](std::vector<Variable>& v) { return embedding(v[0], id); }, {w});
  Tensor id32 = Tensor::empty({2}, DType::i32);
  id32.data<int32_t>()[0] = 1, id32.data<int32_t>()[1] = 1;
  gradcheck([id32](std::vector<Variable>& v) { return embedding(v[0], id32); }, {w});
}

TEST(Embedding, TiedWeightGetsBothContributions) {
  // GPT's lm_head reuses the token embedding: logits = emb(ids) · Wᵀ.
  Tensor id = ids({1, 3}, {2});
  gradcheck([id](std::vector<Variable>& v) { return linear(embedding(v[0], id), v[0], Variable()); },
            {random_tensor({4, 3}, 2)});
}

// Note [Adding into a gradient]: the backward adds its rows onto the gradient
// the table already has (a tied head's) when only the table holds it, and
// never into one that someone else still holds.
TEST(Embedding, AddsOntoAGradientSoFarOnlyWhenTheTableAloneHoldsIt) {
  Tensor id = ids({4, 0, 4}, {3});
  Tensor before = Tensor::full({5, 3}, 1.0f);
  Variable w(random_tensor({5, 3}, 1), true);
  w.set_grad(before);  // the test holds it too
  sum(embedding(w, id)).backward();
  EXPECT_EQ(before.data<float>()[4 * 3], 1.0f);
  EXPECT_EQ(w.grad().data<float>()[4 * 3], 3.0f);  // id 4 twice, onto 1
  EXPECT_EQ(w.grad().data<float>()[1 * 3], 1.0f);
  const void* alone = w.grad().raw();  // the sum: the table's alone now
  sum(embedding(w, id)).backward();
  EXPECT_EQ(w.grad().raw(), alone);
  EXPECT_EQ(w.grad().data<float>()[4 * 3], 5.0f);
  EXPECT_EQ(w.grad().data<float>()[0], 3.0f);
  EXPECT_EQ(w.grad().data<float>()[2 * 3], 1.0f);
}

TEST(Embedding, OutOfRangeIdThrows) {
  Variable w(random_tensor({5, 3}, 1));
  EXPECT_THROW(embedding(w, ids({0, 5}, {2})), Error);
  EXPECT_THROW(embedding(w, ids({-1}, {1})), Error);
  EXPECT_THROW(embedding(w, Tensor::zeros({2})), Error);
}

TEST(Dropout, MaskIsReproducibleScaledAndReusedByBackward) {
  Tensor x = Tensor::full({1000}, 2.0f);
  Rng r1(7), r2(7);
  Variable vx(x, true);
  Variable y1 = dropout(vx, 0.25f, true, r1);
  Variable y2 = dropout(Variable(x), 0.25f, true, r2);
  EXPECT_EQ(y1.value().to_vector(), y2.value().to_vector());
  int zeros = 0;
  for (float v : y1.value().to_vector()) {
    EXPECT_TRUE(v == 0.0f || std::abs(v - 2.0f / 0.75f) < 1e-6f) << v;
    zeros += v == 0.0f;
  }
  EXPECT_GT(zeros, 200);
  EXPECT_LT(zeros, 300);
  y1.backward(Tensor::full({1000}, 1.0f));
  for (int64_t i = 0; i < 1000; ++i) EXPECT_EQ(vx.grad().data<float>()[i], y1.value().data<float>()[i] / 2.0f);
  // A fresh Rng with the same seed per call gives the same mask: finite differences apply.
  gradcheck([](std::vector<Variable>& v) {
    Rng r(3);
    return dropout(v[0], 0.5f, true, r);
  }, {random_tensor({4, 5}, 4)});
}

TEST(Dropout, IdentityWhenNotTrainingOrZero) {
  Rng rng(1);
  Variable x(random_tensor({3}, 1), true);
  EXPECT_EQ(dropout(x, 0.5f, false, rng).impl(), x.impl());
  EXPECT_EQ(dropout(x, 0.0f, true, rng).impl(), x.impl());
  EXPECT_EQ(rng.state().counter, 0u);  // drew nothing
  EXPECT_THROW(dropout(x, 1.5f, true, rng), Error);
}

// Note [Row gradients]: a table tied to a head, with a row sink, gets the
// head's gradient in grad() and is final before the lookup runs its
// backward; the lookup's rows go to the sink, and the two add up to the
// gradient without a sink. An untied table's rows stay its gradient.
TEST(Embedding, ATiedTablesLookupRowsGoToItsSinkAfterItsDenseGradientIsFinal) {
  const Tensor w = random_tensor({5, 3}, 3), x = random_tensor({4, 3}, 4);
  const Tensor id = ids({4, 0, 4, 2}, {2, 2});
  auto tied_loss = [&](Variable& table) {
    Variable h = tanh(add(embedding(table, id), Variable(x.view({2, 2, 3}))));
    Variable logits = linear(h, table, Variable());  // the head: (2, 2, 5)
    return mean(mul(logits, logits));
  };
  Variable whole(w.clone(), true);
  tied_loss(whole).backward();

  Variable apart(w.clone(), true);
  std::vector<std::string> events;
  std::vector<int64_t> rows;
  std::vector<float> values;
  apart.add_grad_ready_hook([&](Variable&) { events.push_back("ready"); });
  apart.set_row_gradient_sink([&](const RowGradient& r) {
    events.push_back("rows");
    EXPECT_EQ(r.first_row, 0);
    EXPECT_EQ(r.grad.shape(), (Shape{2, 2, 3}));
    for (int64_t k = 0; k < r.ids.numel(); ++k) rows.push_back(r.ids.data<int64_t>()[k]);
    values.insert(values.end(), r.grad.data<float>(), r.grad.data<float>() + r.grad.numel());
  });
  tied_loss(apart).backward();
  EXPECT_EQ(events, (std::vector<std::string>{"ready", "rows"}));
  ASSERT_EQ(rows, (std::vector<int64_t>{4, 0, 4, 2}));
  std::vector<float> both = apart.grad().to_vector();
  for (size_t k = 0; k < rows.size(); ++k)
    for (size_t c = 0; c < 3; ++c) both[static_cast<size_t>(rows[k]) * 3 + c] += values[k * 3 + c];
  const std::vector<float> want = whole.grad().to_vector();
  for (size_t e = 0; e < want.size(); ++e) EXPECT_NEAR(both[e], want[e], 1e-6f) << e;

  Variable untied(w.clone(), true);
  bool sunk = false;
  untied.set_row_gradient_sink([&](const RowGradient&) { sunk = true; });
  sum(embedding(untied, id)).backward();
  EXPECT_FALSE(sunk);
  EXPECT_EQ(untied.grad().data<float>()[4 * 3], 2.0f);  // id 4 looked up twice
}

// A sparse table's sink (rows_only) takes the rows of every lookup, two here,
// though no dense gradient comes; grad() stays as it was, and the hooks fire
// once, after the last lookup's rows. Tied to a head, it is a tied table.
TEST(Embedding, ASparseTablesRowsAllGoToItsSinkAndItIsFinalAfterTheLast) {
  const Tensor w = random_tensor({5, 3}, 3);
  const Tensor first = ids({4, 0, 4, 2}, {2, 2}), second = ids({1, 4}, {2});
  Variable table(w.clone(), true);
  std::vector<std::string> events;
  std::vector<int64_t> rows;
  bool ones = true;  // sum(): every looked-up row's gradient is ones
  table.add_grad_ready_hook([&](Variable&) { events.push_back("ready"); });
  table.set_row_gradient_sink(
      [&](const RowGradient& r) {
        events.push_back("rows");
        for (int64_t k = 0; k < r.ids.numel(); ++k) rows.push_back(r.ids.data<int64_t>()[k]);
        for (int64_t e = 0; ones && e < r.grad.numel(); ++e) EXPECT_EQ(r.grad.data<float>()[e], 1.0f);
      },
      /*rows_only=*/true);
  add(sum(embedding(table, first)), sum(embedding(table, second))).backward();
  EXPECT_EQ(events, (std::vector<std::string>{"rows", "rows", "ready"}));
  std::sort(rows.begin(), rows.end());
  EXPECT_EQ(rows, (std::vector<int64_t>{0, 1, 2, 4, 4, 4}));
  EXPECT_FALSE(table.grad().defined());

  events.clear();
  ones = false;
  const Tensor x = random_tensor({4, 3}, 4);
  Variable h = tanh(add(embedding(table, first), Variable(x.view({2, 2, 3}))));
  Variable logits = linear(h, table, Variable());
  mean(mul(logits, logits)).backward();
  EXPECT_EQ(events, (std::vector<std::string>{"ready", "rows"}));  // tied: final with the head's gradient
  EXPECT_TRUE(table.grad().defined());

  table.set_row_gradient_sink(nullptr, true);  // cleared: the rows are its gradient again
  table.zero_grad();
  sum(embedding(table, second)).backward();
  EXPECT_EQ(table.grad().data<float>()[4 * 3], 1.0f);
}

}  // namespace
}  // namespace artel::autograd
