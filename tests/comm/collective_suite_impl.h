// The bodies of collective_suite.h (a header so each test program that runs
// the suite — threads or forked processes — compiles it in).
#pragma once

namespace artel::comm::testing {

inline std::string tag(const char* op, const std::string& algo, DType d, ReduceOp o, int64_t n, bool in_place, bool reg) {
  return std::string(op) + "[" + algo + "] " + dtype_name(d) + " " + reduce_op_name(o) + " n=" + std::to_string(n) +
         (in_place ? " in-place" : " out-of-place") + (reg ? " registered" : "");
}

inline Tensor make(ProcessGroup& pg, bool reg, const Shape& shape, DType d) {
  return reg ? pg.alloc(shape, d) : Tensor::empty(shape, d);
}

inline void check_all_reduce(ProcessGroup& pg, const SuiteOptions& so) {
  const int r = pg.rank(), n = pg.size();
  int k = 0;
  for (const std::string& algo : so.algorithms({"auto", "one_shot", "two_shot", "ring", "all_pairs"}))
    for (DType d : so.dtypes)
      for (ReduceOp op : so.ops)
        so.for_sizes(k++, [&](int64_t count, int variant) {
          bool in_place = variant != 1, reg = variant == 2;
          Tensor in = make(pg, reg, {count}, d);
          for (int64_t i = 0; i < count; ++i) set_element(in, i, value(r, i, op));
          Tensor out = in_place ? in : make(pg, reg, {count}, d);
          auto w = in_place ? pg.all_reduce(in, {op, algo}) : pg.all_reduce(in, out, {op, algo});
          w->wait();
          std::string what = tag("all_reduce", algo, d, op, count, in_place, reg);
          for (int64_t i = 0; i < count; ++i) check_equal(out, i, expected(n, i, op, d), what);
          if (!in_place)
            for (int64_t i = 0; i < count; ++i) check_equal(in, i, value(r, i, op), what + " (input changed)");
        });
}

inline void check_broadcast_reduce(ProcessGroup& pg, const SuiteOptions& so) {
  const int r = pg.rank(), n = pg.size();
  int k = 0;
  for (const std::string& algo : so.algorithms({"shared", "binomial_tree"}))
    for (DType d : so.dtypes) {
      so.for_sizes(k++, [&](int64_t count, int variant) {
        const int root = k % 2 ? n - 1 : 0;
        bool reg = variant == 2;
        Tensor t = make(pg, reg, {count}, d);
        for (int64_t i = 0; i < count; ++i) set_element(t, i, r == root ? value(root, i, ReduceOp::sum) : 99);
        pg.broadcast(t, {root, algo})->wait();
        std::string what = tag("broadcast", algo, d, ReduceOp::sum, count, true, reg) + " root " + std::to_string(root);
        for (int64_t i = 0; i < count; ++i) check_equal(t, i, value(root, i, ReduceOp::sum), what);
      });
      for (ReduceOp op : so.ops)
        so.for_sizes(k++, [&](int64_t count, int variant) {
          const int root = k % 2 ? n - 1 : 0;
          bool reg = variant == 2;
          Tensor t = make(pg, reg, {count}, d);
          for (int64_t i = 0; i < count; ++i) set_element(t, i, value(r, i, op));
          pg.reduce(t, {root, op, algo})->wait();
          std::string what = tag("reduce", algo, d, op, count, true, reg) + " root " + std::to_string(root);
          if (r == root)
            for (int64_t i = 0; i < count; ++i) check_equal(t, i, expected(n, i, op, d), what);
        });
    }
}

inline void check_gather_family(ProcessGroup& pg, const SuiteOptions& so) {
  const int r = pg.rank(), n = pg.size();
  int k = 0;
  for (DType d : so.dtypes) {
    for (const std::string& algo : so.algorithms({"shared", "ring"})) {
      so.for_sizes(k++, [&](int64_t count, int variant) {  // all_gather
        bool reg = variant == 2;
        Tensor in = make(pg, reg, {count}, d), out = make(pg, reg, {count * n}, d);
        for (int64_t i = 0; i < count; ++i) set_element(in, i, value(r, i, ReduceOp::sum));
        pg.all_gather(in, out, {algo})->wait();
        for (int j = 0; j < n; ++j)
          for (int64_t i = 0; i < count; ++i)
            check_equal(out, j * count + i, value(j, i, ReduceOp::sum), tag("all_gather", algo, d, ReduceOp::sum, count, false, reg));
        // In place: `in` is this rank's block of `out`.
        Tensor whole = make(pg, reg, {count * n}, d);
        for (int64_t i = 0; i < count; ++i) set_element(whole, r * count + i, value(r, i, ReduceOp::sum));
        pg.all_gather(whole.slice0(r * count, (r + 1) * count), whole, {algo})->wait();
        for (int j = 0; j < n; ++j)
          for (int64_t i = 0; i < count; ++i)
            check_equal(whole, j * count + i, value(j, i, ReduceOp::sum),
                        tag("all_gather in place", algo, d, ReduceOp::sum, count, false, reg));
      });
      for (ReduceOp op : so.ops)
        so.for_sizes(k++, [&](int64_t count, int variant) {  // reduce_scatter: rank j's element i is value(j, i)
          bool reg = variant == 2;
          Tensor in = make(pg, reg, {count * n}, d), out = make(pg, reg, {count}, d);
          for (int64_t i = 0; i < count * n; ++i) set_element(in, i, value(r, i, op));
          pg.reduce_scatter(in, out, {op, algo})->wait();
          for (int64_t i = 0; i < count; ++i)
            check_equal(out, i, expected(n, r * count + i, op, d), tag("reduce_scatter", algo, d, op, count, false, reg));
          // In place: `out` is this rank's block of `in`; the other blocks stay as they were.
          Tensor whole = make(pg, reg, {count * n}, d);
          for (int64_t i = 0; i < count * n; ++i) set_element(whole, i, value(r, i, op));
          pg.reduce_scatter(whole, whole.slice0(r * count, (r + 1) * count), {op, algo})->wait();
          for (int64_t i = 0; i < count * n; ++i)
            check_equal(whole, i, i / count == r ? expected(n, i, op, d) : value(r, i, op),
                        tag("reduce_scatter in place", algo, d, op, count, true, reg));
        });
    }
    so.for_sizes(k++, [&](int64_t count, int variant) {
      bool reg = variant == 2;
      // all_to_all: rank j's block b holds (10j + b + i) % 50
      Tensor in = make(pg, reg, {count * n}, d), out = make(pg, reg, {count * n}, d);
      for (int b = 0; b < n; ++b)
        for (int64_t i = 0; i < count; ++i) set_element(in, b * count + i, (10 * r + b + i) % 50);
      pg.all_to_all(in, out)->wait();
      for (int j = 0; j < n; ++j)
        for (int64_t i = 0; i < count; ++i)
          check_equal(out, j * count + i, (10 * j + r + i) % 50, tag("all_to_all", "pairwise", d, ReduceOp::sum, count, false, reg));
      // gather to the last rank, then scatter back
      const int root = n - 1;
      Tensor g_in = make(pg, reg, {count}, d), g_out = r == root ? make(pg, reg, {count * n}, d) : Tensor();
      for (int64_t i = 0; i < count; ++i) set_element(g_in, i, value(r, i, ReduceOp::sum));
      pg.gather(g_in, g_out, {root})->wait();
      if (r == root)
        for (int j = 0; j < n; ++j)
          for (int64_t i = 0; i < count; ++i)
            check_equal(g_out, j * count + i, value(j, i, ReduceOp::sum), tag("gather", "linear", d, ReduceOp::sum, count, false, reg));
      Tensor s_out = make(pg, reg, {count}, d);
      pg.scatter(g_out, s_out, {root})->wait();
      for (int64_t i = 0; i < count; ++i)
        check_equal(s_out, i, value(r, i, ReduceOp::sum), tag("scatter", "linear", d, ReduceOp::sum, count, false, reg));
    });
  }
}

inline void check_point_to_point(ProcessGroup& pg) {
  const int r = pg.rank(), n = pg.size();
  if (n < 2) return;
  // Tags out of order, and messages larger than a channel in both directions at once.
  const int peer = r ^ 1;
  if (peer >= n) return;
  const int64_t big = 300000;  // > the 128 KiB rings: needs Note [No send-send deadlock]
  Tensor a = Tensor::full({big}, static_cast<float>(r)), b = Tensor::full({5}, 10.f + r);
  Tensor ra = Tensor::zeros({big}), rb = Tensor::zeros({5});
  auto s1 = pg.send(a, peer, 1), s2 = pg.send(b, peer, 2);
  auto r2 = pg.recv(rb, peer, 2), r1 = pg.recv(ra, peer, 1);
  for (auto& w : {s1, s2, r2, r1}) w->wait();
  for (int64_t i = 0; i < big; i += 997) check_equal(ra, i, peer, "send/recv tag 1");
  for (int64_t i = 0; i < 5; ++i) check_equal(rb, i, 10 + peer, "send/recv tag 2");
}

}  // namespace artel::comm::testing
