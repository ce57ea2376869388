#include "artel/cli/machine_calibration.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <tuple>

#include <nlohmann/json.hpp>

#include "artel/core/error.h"
#include "artel/core/threads.h"
#include "artel/kernels/activation.h"
#include "artel/kernels/attention.h"
#include "artel/kernels/layernorm.h"
#include "artel/kernels/gemm.h"
#include "artel/plan/memory_model.h"
#include "artel/train/train_bench.h"
#include "artel/train/trainer.h"

namespace artel::cli {

std::string MachineFacts::source(const std::string& what) const {
  return "measured: " + what + "; on " + cpu + "; " + when + "; `" + command + "`";
}

MachineFacts this_machine_facts(const std::string& command) {
  MachineFacts f;
  f.command = command;
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    f.cpu = colon == std::string::npos ? line : line.substr(std::min(line.size(), colon + 2));
    break;
  }
  if (f.cpu.empty()) f.cpu = "an unnamed CPU (/proc/cpuinfo has no model name)";
  const std::string bf16 = kernels::bf16_instructions();
  f.cpu += " (" + std::to_string(available_cores()) + " cores" + (bf16.empty() ? "" : ", " + bf16) + ")";
  const std::time_t now = std::time(nullptr);
  char when[32];
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  f.when = when;
  return f;
}

namespace {

// One step of the workload at `batch` sequences, one thread: every product it
// makes, as GemmRecorder saw them.
std::vector<kernels::GemmArgs> record_step_gemms(const std::string& workload, int64_t batch,
                                                 plan::Precision precision) {
  train::BenchCase c{.workload = workload, .threads = 1, .steps = 1, .warmup = 0,
                     .precision = plan::precision_name(precision)};
  train::TrainConfig cfg = train::bench_config(c);
  cfg.batch_size = batch;
  cfg.validate();
  std::ostringstream quiet;
  train::RunOptions run;
  run.out = &quiet;
  run.write_files = false;
  run.evaluate = false;
  run.sample = false;
  train::Trainer trainer(cfg, run);
  kernels::GemmRecorder recorder;
  trainer.run();
  return recorder.calls();
}

}  // namespace

// Note [Interleaved GEMM rounds]: a CPU's speed drifts while it is measured
// (its clock, its neighbours on the host: on a 2-core Zen 3 VM, W2's
// 64 × 128 × 128 product measured 69 to 93 GFLOP/s in four calibrations
// minutes apart, and a fast spell lasted seconds). Products timed one shape
// after another each see a different spell, so the table's shapes disagree
// by more than the shapes do: W2's one-sequence products, timed in a fast
// spell, made a pipeline of 24 one-sequence micro-batches look as fast as
// plain data parallelism, and it ran 17% slower. So every shape of the
// table is timed once a round, round after round, and a shape's time is
// its median over the rounds: each shape sees the same mix of spells, and
// a replay that lost its core for a time slice is an outlier the median
// drops. The median, not the fastest: training runs through every spell,
// and the fastest of the rounds still put that pipeline within 2% of the
// best layout (docs/PLAN.md, #### GEMMs timed in interleaved rounds).
// Rounds stop at 20, or once each shape has 3 and the rounds took ~0.2 s a
// shape.
std::vector<plan::GemmRate> measure_gemm_rates(const std::vector<GemmStep>& steps, plan::Precision precision,
                                               const MachineFacts& facts) {
  struct Shape {
    const GemmStep* step;
    std::vector<kernels::GemmArgs> orientations;
    std::vector<double> ms;
  };
  std::vector<Shape> shapes;
  for (const GemmStep& step : steps) {
    const std::vector<kernels::GemmArgs> calls = record_step_gemms(step.workload, step.batch, precision);
    // A shape's products in every orientation the step makes them (forward,
    // and backward's two transposed ones share m, n, k only sometimes): the
    // table's rate of (m, n, k) is their FLOPs over their time together.
    std::map<std::tuple<int64_t, int64_t, int64_t>, std::map<std::pair<bool, bool>, kernels::GemmArgs>> by_shape;
    for (const kernels::GemmArgs& g : calls) by_shape[{g.m, g.n, g.k}].emplace(std::pair{g.trans_a, g.trans_b}, g);
    for (const auto& [mnk, orientations] : by_shape) {
      Shape shape{&step, {}, {}};
      for (const auto& [_, g] : orientations) shape.orientations.push_back(g);
      shapes.push_back(std::move(shape));
    }
  }
  kernels::set_gemm_precision(precision == plan::Precision::bf16 ? kernels::GemmPrecision::bf16
                                                                 : kernels::GemmPrecision::fp32);
  constexpr int kMinRounds = 3, kMaxRounds = 20;
  const double budget_ms = 200.0 * static_cast<double>(shapes.size());
  double spent_ms = 0;
  train::GemmReplay replay;
  for (int round = 0; round < kMaxRounds && (round < kMinRounds || spent_ms < budget_ms); ++round) {
    for (Shape& shape : shapes) {
      shape.ms.push_back(replay.ms(shape.orientations, 1));
      spent_ms += shape.ms.back();
    }
  }
  kernels::set_gemm_precision(kernels::GemmPrecision::fp32);
  std::vector<plan::GemmRate> rates;
  for (const Shape& shape : shapes) {
    const kernels::GemmArgs& g = shape.orientations.front();
    const double seconds = train::median_after_warmup(shape.ms, 0) / 1e3;
    const double flops = 2.0 * static_cast<double>(g.m * g.n * g.k) * static_cast<double>(shape.orientations.size());
    rates.push_back({precision, g.m, g.n, g.k, flops / seconds,
                     facts.source("one thread, " + std::to_string(shape.orientations.size()) +
                                  " orientation(s) of this product in " + shape.step->workload + " at batch " +
                                  std::to_string(shape.step->batch) + ", replayed alone (train::GemmReplay), median of " +
                                  std::to_string(shape.ms.size()) + " rounds over every shape of the table")});
  }
  return rates;
}

plan::AttentionRate measure_attention(const std::string& workload, plan::Precision precision, const MachineFacts& facts) {
  const train::TrainConfig cfg = train::bench_config({.workload = workload, .steps = 1, .warmup = 0});
  set_num_threads(1);
  kernels::set_gemm_precision(precision == plan::Precision::bf16 ? kernels::GemmPrecision::bf16
                                                                 : kernels::GemmPrecision::fp32);
  const kernels::AttentionDims d{cfg.batch_size, cfg.block_size, cfg.n_embd, cfg.n_head};
  std::vector<float> qkv(static_cast<size_t>(d.batch * d.time * 3 * d.channels), 0.01f);
  std::vector<float> y(qkv.size() / 3), dy(y.size(), 0.01f), dqkv(qkv.size());
  std::vector<float> probs(static_cast<size_t>(d.probs_numel()));
  double forward = 1e30, backward = 1e30;  // the fastest of 5 rounds
  for (int round = 0; round < 5; ++round) {
    const auto start = std::chrono::steady_clock::now();
    kernels::attention_forward(d, qkv.data(), y.data(), probs.data());
    const auto middle = std::chrono::steady_clock::now();
    kernels::attention_backward(d, qkv.data(), probs.data(), dy.data(), dqkv.data());
    const auto end = std::chrono::steady_clock::now();
    forward = std::min(forward, std::chrono::duration<double>(middle - start).count());
    backward = std::min(backward, std::chrono::duration<double>(end - middle).count());
  }
  kernels::set_gemm_precision(kernels::GemmPrecision::fp32);
  const double items = static_cast<double>(d.batch * d.n_head);
  return {cfg.block_size, d.head_size(), forward / items, backward / items,
          facts.source("one thread, kernels::attention_forward and _backward of " + workload + " (" +
                       std::to_string(d.batch) + " sequences x " + std::to_string(d.n_head) +
                       " heads) at " + plan::precision_name(precision) + ", fastest of 5, per (sequence, head)"),
          precision};
}

double measure_memory_bandwidth() {
  // 3 × 64 MiB: far beyond any last-level cache, as a training step's activations are.
  const size_t n = size_t{16} << 20;
  std::vector<float> a(n, 0.0f), b(n, 1.0f), c(n, 2.0f);
  double best = 0;
  for (int round = 0; round < 5; ++round) {
    const auto start = std::chrono::steady_clock::now();
    const float s = 0.5f + static_cast<float>(round);
    for (size_t i = 0; i < n; ++i) a[i] = b[i] + s * c[i];
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, 3.0 * 4.0 * static_cast<double>(n) / seconds);
  }
  ARTEL_CHECK(a[n / 2] > 0, "memory bandwidth: the triad wrote nothing");  // keeps the loop
  return best;
}

namespace {

// The lines `command` prints (stdout and stderr); throws when it fails.
std::vector<std::string> run_program(const std::string& command) {
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen((command + " 2>&1").c_str(), "r"), pclose);
  ARTEL_CHECK(pipe != nullptr, "cannot run `", command, "`");
  std::vector<std::string> lines;
  std::string output;
  char line[4096];
  while (std::fgets(line, sizeof line, pipe.get())) lines.push_back(line), output += line;
  if (pclose(pipe.release()) != 0)
    throw Error("`" + command + "` failed: " + output.substr(0, 400), "run it by hand to see why");
  return lines;
}

}  // namespace

double measure_kernel_stream_rate() {
  // (rows, C) of GPT-2's width; 16 Mi elements, 64 MiB an operand: beyond the caches.
  const int64_t C = 768, rows = (int64_t{16} << 20) / C, n = rows * C;
  std::vector<float> x(static_cast<size_t>(n), 0.5f), y(x.size()), dy(x.size(), 0.01f), dx(x.size());
  std::vector<float> w(static_cast<size_t>(C), 1.0f), b(w.size()), dw(w.size()), db(w.size());
  std::vector<float> mean(static_cast<size_t>(rows)), rstd(mean.size());
  set_num_threads(1);
  // Bytes as the planner counts them: GELU reads and writes (forward) and
  // reads x and dy and writes dx (backward); the layer norm likewise.
  const double bytes = 4.0 * static_cast<double>(n) * (2 + 3 + 2 + 3);
  double best = 1e30;
  for (int round = 0; round < 3; ++round) {
    const auto start = std::chrono::steady_clock::now();
    kernels::gelu_forward(n, x.data(), y.data());
    kernels::gelu_backward(n, x.data(), dy.data(), dx.data());
    kernels::layer_norm_forward(rows, C, x.data(), w.data(), b.data(), 1e-5f, y.data(), mean.data(), rstd.data());
    kernels::layer_norm_backward(rows, C, x.data(), w.data(), mean.data(), rstd.data(), dy.data(), dx.data(),
                                 dw.data(), db.data());
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return bytes / best;
}

namespace {

// (bytes, seconds) of each size an `artel bench comm --json` printed, by size.
std::vector<std::pair<double, double>> bench_rows(const std::string& command) {
  std::vector<std::pair<double, double>> rows;
  for (std::string line : run_program(command)) {
    // A harness that starts each rank through `artel launch` prefixes its lines with "[rank] ".
    if (const size_t end = line.find("] "); line.starts_with('[') && end != std::string::npos) line.erase(0, end + 2);
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.contains("size") && j.contains("time_us"))
      rows.emplace_back(j["size"].get<double>(), j["time_us"].get<double>() / 1e6);
  }
  std::sort(rows.begin(), rows.end());
  return rows;
}

}  // namespace

plan::Link measure_link(const BenchCommand& bench, const std::string& what, const MachineFacts& facts) {
  const std::string sweep = bench("--min-bytes 8 --max-bytes 16M"), largest = bench("--min-bytes 16M --max-bytes 16M");
  const std::vector<std::pair<double, double>> rows = bench_rows(sweep);
  ARTEL_CHECK(rows.size() >= 2, "`", sweep, "` printed fewer than two sizes");
  // The largest message's time is the fastest of three runs: over MPI
  // between the harness's hosts a run now and then moves its messages at
  // half the link's rate throughout (2 of 8 runs of 16 MiB at 1 Gbit/s:
  // 263 ms against 141-146; AMD Zen 3, 2026-11-28).
  double largest_s = rows.back().second;
  for (int run = 0; run < 2; ++run) {
    const std::vector<std::pair<double, double>> again = bench_rows(largest);
    ARTEL_CHECK(again.size() == 1 && again.front().first == rows.back().first, "`", largest, "` printed no ",
                static_cast<int64_t>(rows.back().first), "-byte row");
    largest_s = std::min(largest_s, again.front().second);
  }
  // A ring all-reduce over 2 workers costs 2·alpha + S/beta (2(n−1)/n = 1):
  // alpha from the smallest message, beta from the largest.
  const double alpha = rows.front().second / 2;
  const double beta = rows.back().first / std::max(largest_s - 2 * alpha, 1e-12);
  const std::string how = what + " all-reduce between 2 workers, `" + sweep + "`, fitted to 2·alpha + S/beta";
  return {{alpha, facts.source("alpha: half the " + std::to_string(static_cast<int64_t>(rows.front().first)) +
                               "-byte time of the " + how)},
          {beta, facts.source("beta: the " + std::to_string(static_cast<int64_t>(rows.back().first)) +
                              "-byte time, the fastest of it and two runs of `" + largest + "`, of the " + how)}};
}

plan::Sourced measure_runtime_bytes(const std::string& train_command, const MachineFacts& facts,
                                    const LayoutPages& layout_pages) {
  const std::filesystem::path out =
      std::filesystem::temp_directory_path() / ("artel-calibrate-runtime-" + std::to_string(getpid()));
  // As the layouts run: every core (--threads left to the program), and long
  // enough for the heap to settle. A 2-step run on one thread read 28.8 MiB;
  // W2 on 2 threads holds 31.5 after 2 steps and 41.7 after 24.
  const std::string command = train_command + " --steps 24 --eval-batches 1 --generate 0 --out " + out.string();
  run_program(command);
  std::ifstream in(out / "metrics.jsonl");
  double runtime = -1;
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("memory")) continue;
    for (const nlohmann::json& m : j["memory"]) {  // the worker that holds most besides its model
      double kinds = 0;
      for (const char* k : {"parameters", "gradients", "optimizer_state", "activations", "communication"})
        kinds += m.value(k, 0.0);
      const double layout = layout_pages.bytes ? layout_pages.bytes(m) : 0;
      runtime = std::max(runtime, m.value("peak_resident", 0.0) - kinds - layout);
    }
  }
  std::filesystem::remove_all(out);
  ARTEL_CHECK(runtime > 0, "`", command, "` wrote no memory report with a peak resident set above its model's");
  const std::string less = layout_pages.what.empty() ? "" : " and " + layout_pages.what;
  return {runtime, facts.source("W2's peak resident set (VmHWM) less its memory report's kinds" + less +
                                ", the most of any worker, `" + command + "`")};
}

namespace {

double mem_total_bytes() {
  std::ifstream in("/proc/meminfo");
  for (std::string key; in >> key;) {
    double kib = 0;
    if (key == "MemTotal:" && in >> kib) return kib * 1024;
  }
  throw Error("cannot read MemTotal from /proc/meminfo", "calibrate runs on Linux");
}

// The fastest rate in the table of `precision`, 0 when it has none.
double fastest(const std::vector<plan::GemmRate>& table, plan::Precision precision) {
  double best = 0;
  for (const plan::GemmRate& g : table)
    if (g.precision == precision) best = std::max(best, g.flops_per_s);
  return best;
}

}  // namespace

plan::Cluster calibrate_machine(const MachineFacts& facts, const CalibrationOptions& options) {
  const int cores = available_cores();
  const int workers = options.workers > 0 ? options.workers : cores;
  std::vector<plan::Precision> precisions = {plan::Precision::fp32};
  if (!kernels::bf16_instructions().empty()) precisions.push_back(plan::Precision::bf16);

  plan::Cluster c;
  c.name = "this machine";
  c.hosts = {1, "one machine: `artel plan calibrate` measures the host it runs on"};
  c.workers_per_host = {static_cast<double>(workers), options.workers > 0 ? "--workers" : "the cores (the default)"};
  c.cores_per_host = {static_cast<double>(cores), facts.source("the cores this process may use")};
  c.device.name = facts.cpu + ", one core";
  std::vector<GemmStep> steps;
  for (const std::string& workload : options.workloads) {
    const int64_t bench_batch = train::bench_config({.workload = workload, .steps = 1, .warmup = 0}).batch_size;
    for (plan::Precision p : precisions) c.device.attention_table.push_back(measure_attention(workload, p, facts));
    // Every micro-batch size the benchmark batch splits into (W2: 12, 6, 4,
    // 3, 2, 1): the table's nearest entry to a layout's products is then its
    // own. With 12 and 1 alone, 4 micro-batches of 3 took the 1-sequence
    // rates, and W2's `--pp 2 --micro-batches 4` was predicted 31.5% slow.
    for (int64_t batch = bench_batch; batch >= 1; --batch)
      if (bench_batch % batch == 0) steps.push_back({workload, batch});
  }
  for (plan::Precision p : precisions) {
    std::vector<plan::GemmRate> rates = measure_gemm_rates(steps, p, facts);
    c.device.gemm_table.insert(c.device.gemm_table.end(), rates.begin(), rates.end());
  }
  const double fp32 = fastest(c.device.gemm_table, plan::Precision::fp32);
  const double bf16 = fastest(c.device.gemm_table, plan::Precision::bf16);
  c.device.peak_fp32 = {fp32, facts.source("the fastest fp32 rate of gemm_table (one thread)")};
  c.device.peak_bf16 = bf16 > 0 ? plan::Sourced{bf16, facts.source("the fastest bf16 rate of gemm_table (one thread)")}
                                : plan::Sourced{fp32, "no native bf16 here (artel refuses --precision bf16): fp32's"};
  c.device.gemm_efficiency = {1, "the peaks above are achieved rates already"};
  c.device.memory_bytes = {mem_total_bytes() / workers, facts.source("/proc/meminfo MemTotal / the workers")};
  c.device.memory_bandwidth = {measure_memory_bandwidth(),
                               facts.source("one thread's triad a = b + s·c over 3 × 64 MiB, best of 5")};
  // The planner's streaming terms are artel's kernels (layer norms, GELU,
  // adds), which compute as they stream (GELU's erf) and run below the
  // triad's rate: their achieved fraction of it is the efficiency.
  const double kernels_rate = measure_kernel_stream_rate();
  c.device.memory_efficiency = {
      std::min(1.0, kernels_rate / c.device.memory_bandwidth.value),
      facts.source("one thread's GELU and layer norm forward and backward over 64 MiB operands, fastest of 3: " +
                   std::to_string(kernels_rate / 1e9).substr(0, 5) + " GB/s as the planner counts their bytes, over "
                   "the triad's bandwidth")};
  // The program that measures the link and the runtime: this one.
  const std::string program = !options.artel_program.empty()
                                  ? options.artel_program
                                  : std::filesystem::read_symlink("/proc/self/exe").string();
  const std::string bench = program + " bench comm --op all_reduce --json";
  if (options.hosts > 1) {
    auto on_hosts = [&](const std::string& ranks, const std::string& command) {
      std::string launcher = options.hosts_command;
      launcher.replace(launcher.find("{ranks}"), 7, ranks);
      return launcher + " " + command + " --backend mpi";
    };
    auto on_every_host = [&](int64_t ranks) {
      std::string list = std::to_string(ranks);
      for (int h = 1; h < options.hosts; ++h) list.append(",").append(std::to_string(ranks));
      return list;
    };
    // Inside a host: 2 ranks of each host as a group of their own, every host
    // at once, as a tensor-parallel group runs (on artel's shared memory,
    // Note [Subgroups on one host]).
    c.intra_host = measure_link(
        [&](const std::string& sizes) { return on_hosts(on_every_host(2), bench + " " + sizes + " --within-host"); },
        "shared-memory (2 ranks within each host, every host at once)", facts);
    // One rank a host has the host's whole link to itself; inter_host is one
    // worker's share of it (plan/cluster.h), and a host's workers leave
    // through the same link at once (tp groups' dp rings side by side).
    c.inter_host = measure_link([&](const std::string& sizes) { return on_hosts("1,1", bench + " " + sizes); },
                                "MPI across two hosts", facts);
    c.inter_host.beta = {c.inter_host.beta.value / static_cast<double>(c.per_host()),
                         c.inter_host.beta.source + ", divided by the " + std::to_string(c.per_host()) +
                             " workers a host: one worker's share of its host's link"};
    // An MPI worker holds its library's buffers besides the program: measured
    // on the harness, all its workers data-parallel, less the scratch of their
    // hierarchical collectives (one bucket, so the largest is the gradients).
    const int64_t per_host = c.per_host();
    const LayoutPages scratch = {
        [per_host](const nlohmann::json& m) {
          return per_host > 1 ? plan::hierarchical_scratch(per_host, 1, m.value("gradients", 0.0)) : 0;
        },
        "its hierarchical collectives' scratch (plan::hierarchical_scratch)"};
    c.device.runtime_bytes = measure_runtime_bytes(
        on_hosts(on_every_host(per_host),
                 program + " train --timeout 600 --zero 1 --first-bucket-mb 1024 --bucket-mb 1024"),
        facts, scratch);
    c.name = "this machine as a harness of " + std::to_string(options.hosts) + " hosts";
    c.hosts = {static_cast<double>(options.hosts), "--hosts: the harness's hosts (--hosts-command)"};
    c.cores_per_host = {static_cast<double>(cores) / options.hosts,
                        facts.source("the cores this process may use, shared by the harness's " +
                                     std::to_string(options.hosts) + " hosts")};
    c.device.memory_bytes = {c.device.memory_bytes.value / options.hosts,
                             facts.source("/proc/meminfo MemTotal / the workers of the harness's hosts, which share it")};
  } else {
    c.device.runtime_bytes = measure_runtime_bytes(program + " train", facts);
    if (c.per_host() > 1) {  // two workers, data-parallel, as the layouts of several run
      // ZeRO-1 registers the weights (the report's parameters) and the gradient
      // buckets, and broadcasts the weights.
      const LayoutPages peers = {
          [](const nlohmann::json& m) {
            const double weights = m.value("parameters", 0.0);
            return plan::peer_pages(2, weights + m.value("gradients", 0.0), weights);
          },
          "the pages of its peer's registered buckets it touches (plan::peer_pages)"};
      c.device.runtime_bytes_with_peers = measure_runtime_bytes(program + " train --nproc 2 --zero 1", facts, peers);
    }
    c.intra_host = measure_link([&](const std::string& sizes) { return bench + " " + sizes + " --backend shm -n 2"; },
                                "shared-memory", facts);
    c.inter_host = {{c.intra_host.alpha.value, "one host: no inter-host link; the intra-host link's"},
                    {c.intra_host.beta.value, "one host: no inter-host link; the intra-host link's"}};
  }
  c.validate();
  return c;
}

}  // namespace artel::cli
