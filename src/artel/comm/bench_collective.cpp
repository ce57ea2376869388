#include "artel/comm/bench_collective.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>

namespace artel::comm {
namespace {

const std::vector<std::string>& bench_ops() {
  static const std::vector<std::string> ops = {"all_reduce", "broadcast", "reduce", "all_gather",
                                                "reduce_scatter", "all_to_all", "sendrecv"};
  return ops;
}

// Small integers every dtype and reduce op keep exact (products stay 1 or 2^k small).
double pattern(int rank, int64_t i, ReduceOp op) {
  if (op == ReduceOp::prod) return (i + rank) % 7 == 0 ? 2 : 1;
  return static_cast<double>((i + 3 * rank) % 5);
}

double reduced(int n, int64_t i, ReduceOp op) {
  double acc = pattern(0, i, op);
  for (int r = 1; r < n; ++r) {
    double v = pattern(r, i, op);
    acc = op == ReduceOp::prod ? acc * v : op == ReduceOp::max ? std::max(acc, v) : op == ReduceOp::min ? std::min(acc, v) : acc + v;
  }
  return op == ReduceOp::avg ? acc / n : acc;
}

// One benchmark case: the buffers and how to run and check the op.
struct Case {
  Tensor in, out;
  bool registered = false;
  std::function<WorkPtr()> run;
  std::function<void()> fill;
  std::function<int64_t()> count_wrong;
};

Tensor buffer(ProcessGroup& pg, bool registered, int64_t count, DType d, bool& got_registered) {
  if (registered) {
    try {
      return pg.alloc({count}, d);
    } catch (const Error&) {  // too large for the arena: plain memory
    }
  }
  got_registered = false;
  return Tensor::zeros({count}, d);
}

// Elements of t (from `begin` on) that differ from want(i), with want
// rounded the way t's dtype rounds.
int64_t count_mismatch(const Tensor& t, const std::function<double(int64_t)>& want) {
  Tensor probe = Tensor::zeros({1}, t.dtype());
  int64_t wrong = 0;
  for (int64_t i = 0; i < t.numel(); ++i) {
    double w = want(i);
    set_element(probe, 0, t.dtype() == DType::i32 || t.dtype() == DType::i64 ? std::trunc(w) : w);
    wrong += element(t, i) != element(probe, 0);
  }
  return wrong;
}

Case make_case(ProcessGroup& pg, const BenchOptions& o, int64_t count) {
  const int n = pg.size(), r = pg.rank();
  const std::string& op = o.op;
  Case c;
  c.registered = o.registered;
  int64_t in_count = op == "all_gather" ? count / n : count, out_count = op == "reduce_scatter" ? count / n : count;
  c.in = buffer(pg, o.registered, in_count, o.dtype, c.registered);
  bool in_place = op == "all_reduce" || op == "broadcast" || op == "reduce";
  c.out = in_place ? c.in : buffer(pg, o.registered, out_count, o.dtype, c.registered);
  Tensor in = c.in, out = c.out;
  const ReduceOp redop = o.redop;
  c.fill = [=]() mutable {
    for (int64_t i = 0; i < in.numel(); ++i) set_element(in, i, pattern(r, i, redop));
  };
  std::function<double(int64_t)> want;  // expected out[i]
  if (op == "all_reduce") {
    c.run = [=, &pg] { return pg.all_reduce(in, {redop, o.algorithm}); };
    want = [=](int64_t i) { return reduced(n, i, redop); };
  } else if (op == "broadcast") {
    c.run = [=, &pg] { return pg.broadcast(in, {0, o.algorithm}); };
    want = [=](int64_t i) { return pattern(0, i, redop); };
  } else if (op == "reduce") {
    c.run = [=, &pg] { return pg.reduce(in, {0, redop, o.algorithm}); };
    want = [=](int64_t i) { return r == 0 ? reduced(n, i, redop) : element(in, i); };  // only the root's is defined
  } else if (op == "all_gather") {
    c.run = [=, &pg] { return pg.all_gather(in, out, {o.algorithm}); };
    want = [=](int64_t i) { return pattern(static_cast<int>(i / in_count), i % in_count, redop); };
  } else if (op == "reduce_scatter") {
    c.run = [=, &pg] { return pg.reduce_scatter(in, out, {redop, o.algorithm}); };
    want = [=](int64_t i) { return reduced(n, r * out_count + i, redop); };
  } else if (op == "all_to_all") {
    c.run = [=, &pg] { return pg.all_to_all(in, out, {o.algorithm}); };
    int64_t block = count / n;
    want = [=](int64_t i) { return pattern(static_cast<int>(i / block), r * block + i % block, redop); };
  } else {  // sendrecv: to the right, from the left (ops complete in order, so the recv's wait covers the send)
    c.run = [=, &pg] {
      pg.send(in, (r + 1) % n, 7);
      return pg.recv(out, (r + n - 1) % n, 7);
    };
    want = [=](int64_t i) { return pattern((r + n - 1) % n, i, redop); };
  }
  c.count_wrong = [out, want] { return count_mismatch(out, want); };
  return c;
}

// Each size measured: the bytes asked (min, 2·min, ... up to max) and the
// elements that fill them, whole blocks of `ranks` for a collective of blocks.
std::vector<std::pair<size_t, int64_t>> measured_sizes(const BenchOptions& o, int ranks) {
  const bool blocks = o.op == "all_gather" || o.op == "reduce_scatter" || o.op == "all_to_all";
  std::vector<std::pair<size_t, int64_t>> sizes;
  for (size_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= 2) {
    int64_t count = static_cast<int64_t>(bytes / dtype_size(o.dtype));
    if (blocks) count -= count % ranks;
    if (count > 0) sizes.emplace_back(bytes, count);
  }
  return sizes;
}

int auto_iters(size_t bytes) { return static_cast<int>(std::clamp<size_t>((256ull << 20) / std::max<size_t>(bytes, 1), 5, 1000)); }

}  // namespace

void check_bench_options(const BenchOptions& o, int ranks) {
  if (std::find(bench_ops().begin(), bench_ops().end(), o.op) == bench_ops().end()) {
    std::string names;
    for (const auto& op : bench_ops()) names += (names.empty() ? "" : "|") + op;
    throw Error("unknown op '" + o.op + "' to benchmark", "use --op " + names);
  }
  if (o.min_bytes < 1 || o.min_bytes > o.max_bytes)
    throw Error("the smallest size (" + std::to_string(o.min_bytes) + " bytes) must be at least 1 and at most the largest (" +
                    std::to_string(o.max_bytes) + ")",
                "give --min-bytes <= --max-bytes");
  if (o.max_bytes < dtype_size(o.dtype))
    throw Error("the largest size (" + std::to_string(o.max_bytes) + " bytes) holds no " + dtype_name(o.dtype) +
                    " element (" + std::to_string(dtype_size(o.dtype)) + " bytes), so no size would be measured",
                "raise --max-bytes");
  if (ranks > 1 && measured_sizes(o, ranks).empty())
    throw Error(detail::concat("no size from ", o.min_bytes, " to ", o.max_bytes, " bytes holds a ", dtype_name(o.dtype),
                               " element for each of the ", ranks, " ranks, which ", o.op, " needs"),
                detail::concat("raise --max-bytes to at least ", static_cast<size_t>(ranks) * dtype_size(o.dtype)));
}

double bus_factor(const std::string& op, int n) {
  if (op == "all_reduce") return 2.0 * (n - 1) / n;
  if (op == "all_gather" || op == "reduce_scatter" || op == "all_to_all") return static_cast<double>(n - 1) / n;
  return 1.0;
}

std::vector<BenchRow> bench_collective(ProcessGroup& pg, const BenchOptions& o) {
  check_bench_options(o, pg.size());  // each rank alike: every one refuses, none waits
  ARTEL_CHECK(o.op != "sendrecv" || pg.size() >= 2, "bench: sendrecv needs at least 2 ranks");
  const int n = pg.size();
  const size_t e = dtype_size(o.dtype);
  std::vector<BenchRow> rows;
  for (const auto& [bytes, count] : measured_sizes(o, n)) {
    Case c = make_case(pg, o, count);
    int iters = o.iters > 0 ? o.iters : auto_iters(bytes);
    int warmup = o.warmup > 0 ? o.warmup : std::max(2, iters / 10);
    c.in.zero();
    for (int i = 0; i < warmup; ++i) c.run()->wait();
    pg.barrier()->wait();
    const int64_t sent0 = pg.bytes_sent();
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) c.run()->wait();
    double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / iters;
    const double sent = static_cast<double>(pg.bytes_sent() - sent0) / iters;
    c.fill();
    pg.barrier()->wait();
    c.run()->wait();
    const std::string algorithm = o.op == "sendrecv" ? "-" : pg.last_algorithm();
    Tensor stats = Tensor::zeros({2}, DType::f64);  // the slowest time, the most bytes sent
    stats.data<double>()[0] = us;
    stats.data<double>()[1] = sent;
    pg.all_reduce(stats, {ReduceOp::max})->wait();
    Tensor wrong = Tensor::zeros({1}, DType::i64);
    wrong.data<int64_t>()[0] = c.count_wrong();
    pg.all_reduce(wrong)->wait();
    BenchRow row;
    row.bytes = static_cast<size_t>(count) * e;
    row.count = static_cast<size_t>(count);
    row.type = dtype_name(o.dtype);
    row.redop = (o.op == "all_reduce" || o.op == "reduce" || o.op == "reduce_scatter") ? reduce_op_name(o.redop) : "none";
    row.root = (o.op == "broadcast" || o.op == "reduce") ? 0 : -1;
    row.time_us = stats.data<double>()[0];
    row.algbw = row.bytes / (row.time_us * 1e-6) / 1e9;
    row.busbw = row.algbw * bus_factor(o.op, n);
    row.wrong = wrong.data<int64_t>()[0];
    row.registered = c.registered;
    if (algorithm != "native") row.sent = stats.data<double>()[1];  // MPI's own collectives count nothing
    row.algorithm = algorithm;
    rows.push_back(row);
  }
  return rows;
}

}  // namespace artel::comm
