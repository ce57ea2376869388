// `artel bench train`: ms/step of W1, W2, the CNN and GPT-2 at 1 and 2 threads, and —
// when Debian's python3 has torch — the PyTorch harness (tools/torch/train.py)
// on the same workloads in the same run, with the ratio artel / PyTorch
// (below 1 = artel faster). A benchmark, not a test.
//
//   artel bench train                                 # everything (about 2 minutes)
//   artel bench train --workloads w1 --threads 1 --steps 60 --torch off
//   artel bench train --workloads w2 --threads 1 --repeat 5   # medians over 5 interleaved rounds
//   artel bench train --gemm onednn,openblas          # also on PyTorch's own GEMM kernels
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <tuple>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "artel/cli/bench_registry.h"
#include "artel/cli/parse_flags.h"
#include "artel/core/error.h"
#include "artel/kernels/attention.h"
#include "artel/kernels/gemm.h"
#include "artel/kernels/gemm_bf16.h"
#include "artel/launch/launcher.h"
#include "artel/nn/model.h"
#include "artel/train/bundled_data.h"
#include "artel/train/train_bench.h"

namespace artel::cli {

namespace {

struct BenchArgs {
  std::vector<std::string> workloads = {"w1", "w2", "cnn"};
  std::vector<int> threads = {1, 2};
  std::vector<std::string> gemms = {"onednn"};  // artel's GEMM libraries to measure, each in every round
  std::vector<std::string> precisions = {"fp32"};  // each on artel and on PyTorch (bf16: its autocast)
  int64_t steps = 0;  // 0 = each workload's default
  int64_t warmup = -1;  // -1 = 20, or a quarter of the steps when fewer (train::bench_warmup)
  std::string torch = "auto";  // auto | on | off
  std::string python = "/usr/bin/python3";
  std::string harness;         // "" = tools/torch/train.py of the project (train::project_root())
  int timeout_s = 900;
  bool json = false;
  bool scaling = false;        // data-parallel scaling instead of ms/step
  std::vector<int64_t> zero;             // ZeRO stages to compare on 2 workers instead of ms/step
  std::vector<std::string> recompute;    // recompute modes to compare on 1 worker instead of ms/step
  int repeat = 1;              // rounds, each timing every side once
};

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// A command started under coreutils `timeout`; finish() returns its stdout
// lines (stderr passes through). Several may run at once.
class CapturedRun {
 public:
  CapturedRun(const std::vector<std::string>& argv, int timeout_s)
      : cmd_("timeout --kill-after=10 " + std::to_string(timeout_s)) {
    for (const auto& a : argv) cmd_ += " " + shell_quote(a);
    pipe_ = popen(cmd_.c_str(), "r");
    if (!pipe_) throw Error("cannot start " + argv.at(0));
  }
  CapturedRun(const CapturedRun&) = delete;
  CapturedRun& operator=(const CapturedRun&) = delete;
  ~CapturedRun() {
    if (pipe_) pclose(pipe_);
  }
  // Throws when the command exited non-zero.
  std::vector<std::string> finish() {
    std::vector<std::string> lines;
    std::string line;
    char buf[4096];
    while (std::fgets(buf, sizeof buf, pipe_)) {
      line += buf;
      if (line.back() != '\n') continue;
      line.pop_back();
      lines.push_back(std::move(line));
      line.clear();
    }
    int status = pclose(pipe_);
    pipe_ = nullptr;
    if (status != 0)
      throw Error("`" + cmd_ + "` failed (status " + std::to_string(status) + ")", "run it by hand to see why");
    return lines;
  }

 private:
  std::string cmd_;
  FILE* pipe_ = nullptr;
};

std::vector<std::string> run_captured(const std::vector<std::string>& argv, int timeout_s) {
  return CapturedRun(argv, timeout_s).finish();
}

// What the harness's torch says it multiplies with: its BLAS_INFO build
// setting and version, e.g. "generic 1.13.0a0" (Debian's, through the system
// BLAS) or "mkl 2.11.0" (PyPI's wheels).
std::string torch_blas(const BenchArgs& a) {
  const std::string probe =
      "import re, torch; m = re.search(r'BLAS_INFO=(\\w+)', torch.__config__.show()); "
      "print(m.group(1) if m else 'unknown', torch.__version__)";
  std::vector<std::string> lines = run_captured({a.python, "-c", probe}, 60);
  return lines.empty() ? "unknown" : lines.front();
}

// Which kernels multiply on each side. Debian's PyTorch calls OpenBLAS, whose
// kernels OPENBLAS_CORETYPE (read when OpenBLAS loads, inherited by the
// harness) may force; artel's --gemm openblas runs those same kernels. A
// torch built with MKL (PyPI's) picks its own kernels, so it is named instead.
std::string gemm_lines(const BenchArgs& a, const std::string& harness) {
  std::string s;
  for (const std::string& g : a.gemms)
    s += "# artel GEMM " + g + ": " + kernels::gemm_kernels(kernels::parse_gemm_library(g)) + "\n";
  if (harness.empty()) return s;
  const std::string blas = torch_blas(a);
  if (blas.rfind("mkl", 0) == 0) return s + "# PyTorch GEMM: MKL (torch " + blas.substr(4) + ", BLAS_INFO=mkl)\n";
  return s + "# PyTorch GEMM: " + kernels::gemm_kernels(kernels::GemmLibrary::openblas) + "\n";
}

// Where the PyTorch harness is, or "" with the reason it is skipped in `why`.
std::string find_torch_harness(const BenchArgs& a, std::string& why) {
  if (a.torch == "off") return why = "--torch off", "";
  std::string harness = a.harness;
  if (harness.empty()) {
    try {
      harness = train::project_root() + "/tools/torch/train.py";
    } catch (const Error& e) {
      why = e.what();
    }
  }
  std::error_code ec;
  if (!harness.empty() && !std::filesystem::exists(harness, ec)) why = harness + " not found";
  else if (!harness.empty() && std::system((shell_quote(a.python) + " -c 'import torch' >/dev/null 2>&1").c_str()) != 0)
    why = a.python + " has no torch (apt-get install python3-torch)";
  if (why.empty()) return harness;
  if (a.torch == "on") throw Error("cannot run the PyTorch harness: " + why, "pass --torch off to skip it");
  return "";
}

std::optional<double> torch_median_ms(const BenchArgs& a, const std::string& harness, const train::BenchCase& c) {
  std::vector<std::string> argv = train::torch_harness_command(a.python, harness, c);
  if (argv.empty()) return std::nullopt;
  for (const std::string& line : run_captured(argv, a.timeout_s))
    if (auto ms = train::parse_peer_median_ms(line)) return ms;
  throw Error("the PyTorch harness printed no summary line", "run " + harness + " by hand to see why");
}

// One row of the ms/step table. `round` is "" for a single round, else "#k"
// or "median" (then `torch_range` holds the lowest and highest per-round ratio).
void print_row(const BenchArgs& a, const train::BenchResult& r, std::optional<double> torch_ms,
               const std::string& round = "", std::optional<std::pair<double, double>> torch_range = std::nullopt) {
  const bool tokens = r.bench.workload == "w2" || r.bench.workload == "gpt2" || r.bench.workload == "gpt-50m";
  const char* unit = tokens ? "tok/s" : "samples/s";
  if (a.json) {
    nlohmann::json j = {{"workload", r.bench.workload}, {"threads", r.bench.threads}, {"steps", r.bench.steps},
                        {"timed_steps", r.timed_steps},  {"artel_median_ms", r.median_ms}, {"artel_mean_ms", r.mean_ms},
                        {"final_loss", r.final_loss}};
    if (!round.empty()) j["round"] = round;
    if (r.gemm_ms > 0) j["artel_gemm_ms"] = r.gemm_ms;
    j["gemm"] = r.bench.gemm;
    j["precision"] = r.bench.precision;
    if (r.bench.precision == "bf16") {
      j["bf16_instructions"] = kernels::bf16_instructions();
      j["bf16_kernel"] = kernels::bf16_kernel_name();
    }
    j["gemm_kernels"] = kernels::gemm_kernels(kernels::parse_gemm_library(r.bench.gemm));
    if (torch_ms) j["torch_median_ms"] = *torch_ms, j["artel_over_torch"] = r.median_ms / *torch_ms;
    if (torch_range) j["artel_over_torch_range"] = {torch_range->first, torch_range->second};
    std::cout << j.dump() << std::endl;
    return;
  }
  char ratio[64] = "-", peer[32] = "-", gemms[32] = "-";
  if (r.gemm_ms > 0) std::snprintf(gemms, sizeof gemms, "%.2f", r.gemm_ms);
  if (torch_ms) {
    std::snprintf(peer, sizeof peer, "%.2f", *torch_ms);
    std::snprintf(ratio, sizeof ratio, "%.2f", r.median_ms / *torch_ms);
  }
  std::string label = r.bench.workload;
  if (!round.empty()) label.append(" ").append(round);
  std::printf("%-10s %7d %-8s %-4s %6lld %10.2f %10s %12s %12.0f %-9s %9s\n", label.c_str(), r.bench.threads,
              r.bench.gemm.c_str(), r.bench.precision.c_str(), static_cast<long long>(r.bench.steps), r.median_ms, peer,
              ratio, r.items_per_s, unit, gemms);
  std::fflush(stdout);
}

// Every round's measurements of one (workload, threads).
struct BenchRounds {
  std::vector<train::BenchResult> artel;
  std::vector<double> torch_ms;  // empty when PyTorch did not run (no harness, or no peer recipe: gpt-50m)
};

// The median row of `--repeat` rounds: artel's medians, and PyTorch's with
// the ratio of the two medians and the range of the per-round ratios.
void print_median_row(const BenchArgs& a, const BenchRounds& rounds) {
  const train::BenchResult& first = rounds.artel.front();
  std::vector<double> ms, gemm, mean;
  for (const train::BenchResult& r : rounds.artel)
    ms.push_back(r.median_ms), gemm.push_back(r.gemm_ms), mean.push_back(r.mean_ms);
  train::BenchResult median = first;
  median.median_ms = train::median_after_warmup(ms, 0);
  median.mean_ms = train::median_after_warmup(mean, 0);
  median.gemm_ms = train::median_after_warmup(gemm, 0);
  median.items_per_s = first.items_per_s * first.median_ms / median.median_ms;  // the same items every step
  if (rounds.torch_ms.size() != rounds.artel.size()) return print_row(a, median, std::nullopt, "median");
  std::vector<std::pair<double, double>> pairs;
  for (size_t i = 0; i < ms.size(); ++i) pairs.emplace_back(ms[i], rounds.torch_ms[i]);
  const train::RatioOfMedians m = train::ratio_of_medians(pairs);
  print_row(a, median, m.b_ms, "median", std::pair(m.lowest, m.highest));
  if (!a.json)
    std::printf("# %s, %d thread(s), %s %s: artel/torch per round %.2f .. %.2f\n", first.bench.workload.c_str(),
                first.bench.threads, first.bench.gemm.c_str(), first.bench.precision.c_str(), m.lowest, m.highest);
}

// One measured case of the ms/step table.
using CaseKey = std::tuple<std::string, int, std::string, std::string>;  // workload, threads, gemm, precision

// bf16 products run on oneDNN only (TrainConfig::validate).
bool measurable(const std::string& gemm, const std::string& precision) {
  return precision == "fp32" || gemm == "onednn";
}

void print_scaling(const std::map<CaseKey, double>& ms, const BenchArgs& a) {
  if (a.json) return;
  for (const auto& w : a.workloads)
    for (const auto& g : a.gemms)
      for (const auto& p : a.precisions) {
        auto one = ms.find({w, 1, g, p});
        if (one == ms.end()) continue;
        for (int t : a.threads)
          if (t > 1 && ms.count({w, t, g, p}))
            std::printf("%s, %s %s: %d threads %.2fx the speed of 1 thread\n", w.c_str(), g.c_str(), p.c_str(), t,
                        one->second / ms.at({w, t, g, p}));
      }
}

// With several precisions: each case against PyTorch's fastest setting on
// this machine (the lowest of its per-precision medians).
void print_against_fastest(const std::map<CaseKey, double>& ms, const std::map<CaseKey, double>& torch_ms,
                           const BenchArgs& a) {
  if (a.json || a.precisions.size() < 2) return;
  for (const auto& w : a.workloads)
    for (int t : a.threads) {
      std::optional<std::pair<double, std::string>> fastest;
      for (const auto& p : a.precisions) {
        auto it = torch_ms.find({w, t, "", p});
        if (it != torch_ms.end() && (!fastest || it->second < fastest->first)) fastest = {it->second, p};
      }
      if (!fastest) continue;
      for (const auto& [key, artel] : ms)
        if (std::get<0>(key) == w && std::get<1>(key) == t)
          std::printf("%s, %d thread(s), artel %s %s: %.2f ms = %.2fx PyTorch's fastest (%s, %.2f ms)\n", w.c_str(), t,
                      std::get<2>(key).c_str(), std::get<3>(key).c_str(), artel, artel / fastest->first,
                      fastest->second.c_str(), fastest->first);
    }
}

// One run of the real program, `artel train [--nproc W] <c's recipe> --out TMP`,
// started at construction and timed from its metrics.jsonl by finish().
class ProgramRun {
 public:
  ProgramRun(const BenchArgs& a, const train::BenchCase& c) : warmup_(train::bench_warmup(c)) {
    train::TrainConfig cfg = train::bench_config(c);
    cfg.eval_every = 0;
    cfg.eval_batches = 1;
    char dir[] = "/tmp/artel-bench-scaling-XXXXXX";
    if (!mkdtemp(dir)) throw Error("cannot create a temporary directory under /tmp");
    dir_ = dir;
    std::vector<std::string> argv = {launch::current_executable(), "train"};
    if (c.workers > 1) argv.insert(argv.end(), {"--nproc", std::to_string(c.workers)});
    for (std::string& f : train::config_flags(cfg)) argv.push_back(std::move(f));
    argv.insert(argv.end(), {"--out", dir_});
    try {
      run_.emplace(argv, a.timeout_s);
    } catch (...) {
      remove_dir();
      throw;
    }
  }
  ProgramRun(const ProgramRun&) = delete;
  ProgramRun& operator=(const ProgramRun&) = delete;
  ~ProgramRun() {
    run_.reset();  // waits for the program before its directory goes
    remove_dir();
  }
  train::RunTimes finish() {
    run_->finish();
    return train::read_run_times(dir_ + "/metrics.jsonl", warmup_);
  }

 private:
  void remove_dir() noexcept {
    std::error_code ignored;  // a leftover temporary directory is not worth a failed benchmark
    std::filesystem::remove_all(dir_, ignored);
  }
  int64_t warmup_;
  std::string dir_;
  std::optional<CapturedRun> run_;
};

train::RunTimes program_run_times(const BenchArgs& a, const train::BenchCase& c) { return ProgramRun(a, c).finish(); }

// `workers` copies of the 1-worker run `one` at once, sharing nothing: the
// step time of their combined throughput, which is what the machine itself
// allows that many workers when communication costs nothing, and their pace
// in lockstep (train::lockstep_step_ms), what workers that wait for each
// other every step could reach.
struct IndependentRuns {
  double combined_ms = 0, lockstep_ms = 0;
};
IndependentRuns independent_runs(const BenchArgs& a, const train::BenchCase& one, int workers) {
  std::vector<std::unique_ptr<ProgramRun>> runs;
  for (int i = 0; i < workers; ++i) runs.push_back(std::make_unique<ProgramRun>(a, one));
  std::vector<double> medians;
  std::vector<std::vector<double>> steps;
  for (auto& r : runs) {
    train::RunTimes t = r->finish();
    medians.push_back(t.median_ms);
    steps.push_back(std::move(t.timed_ms));
  }
  return {train::combined_step_ms(medians), train::lockstep_step_ms(steps)};
}

// One line of the scaling table. `round` is "" for a single round, else
// "#k" or "median" (the medians over rounds).
void print_scaling_row(const BenchArgs& a, const std::string& workload, const std::string& gemm, const std::string& round,
                       int64_t steps, const train::ScalingSummary& s, const std::optional<train::ScalingSummary>& peer) {
  if (a.json) {
    nlohmann::json j = {{"workload", workload},
                        {"gemm", gemm},
                        {"artel_1x1_ms", s.one_ms},
                        {"artel_2x1_ms", s.many_ms},
                        {"artel_efficiency", s.efficiency},
                        {"sync_share", s.sync_share},
                        {"independent_efficiency", s.independent_efficiency},
                        {"lockstep_efficiency", s.lockstep_efficiency}};
    if (!round.empty()) j["round"] = round;
    if (s.lowest != s.highest) j["artel_efficiency_range"] = {s.lowest, s.highest};
    if (peer) j["torch_1x1_ms"] = peer->one_ms, j["torch_2x1_ms"] = peer->many_ms, j["torch_efficiency"] = peer->efficiency;
    std::cout << j.dump() << std::endl;
    return;
  }
  char torch[64] = "        -         -       -";
  if (peer) std::snprintf(torch, sizeof torch, "%9.2f %9.2f %7.3f", peer->one_ms, peer->many_ms, peer->efficiency);
  std::string label = workload;
  if (!round.empty()) label.append(" ").append(round);
  std::printf("%-11s %-8s %6lld %9.2f %9.2f %7.3f %6.1f%% %7.3f %8.3f %s\n", label.c_str(), gemm.c_str(),
              static_cast<long long>(steps), s.one_ms, s.many_ms, s.efficiency, 100 * s.sync_share,
              s.independent_efficiency, s.lockstep_efficiency, torch);
  std::fflush(stdout);
}

// Scaling efficiency = throughput(2 workers x 1 thread) / (2 x throughput(1 x 1)) = median_1 / median_2
// (the per-worker batch is the recipe's in both), for artel and the PyTorch harness's DDP, next to the
// efficiency of two independent 1 x 1 runs at once (the machine's own share of the loss). Each of the
// --repeat rounds runs artel 1 x 1, 2 x 1, the independent pair, then PyTorch's two, so all see the same machine.
void bench_scaling(const BenchArgs& a, const std::string& harness) {
  if (!a.json) {
    std::printf("# data-parallel scaling: 2 workers x 1 thread vs 1 x 1, same per-worker batch; efficiency = "
                "median_1 / median_2; sync = exposed T_sync share of a 2-worker step\n");
    std::printf("# indep = the same efficiency for two independent 1 x 1 runs at once (no communication, no "
                "synchronisation): what the machine itself gives two workers; lockstep = the same for the slower "
                "of the two at each step, the most that workers waiting for each other every step can reach (below "
                "indep where the cores differ in speed or the steps jitter)\n");
    std::printf("%s", gemm_lines(a, harness).c_str());
    if (a.repeat > 1)
      std::printf("# %d rounds, each artel 1x1, 2x1 and the independent pair (per GEMM library), torch 1x1, torch "
                  "2x1; 'median' = the medians over rounds and their ratio\n", a.repeat);
    std::printf("%-11s %-8s %6s %9s %9s %7s %7s %7s %8s %9s %9s %7s\n", "workload", "gemm", "steps", "artel_1x1",
                "artel_2x1", "eff", "sync", "indep", "lockstep", "torch_1x1", "torch_2x1", "eff");
  }
  for (const auto& w : a.workloads) {
    std::map<std::string, std::vector<train::ScalingRound>> artel;  // by GEMM library
    std::vector<train::ScalingRound> torch;
    int64_t steps = 0;
    for (int round = 1; round <= a.repeat; ++round) {
      std::optional<train::ScalingSummary> peer_round;
      for (const auto& g : a.gemms) {
        train::BenchCase one{.workload = w, .threads = 1, .steps = a.steps, .warmup = a.warmup, .data = "",
                             .workers = 1, .gemm = g};
        train::BenchCase two = one;
        two.workers = 2;
        steps = train::bench_config(one).steps;
        train::RunTimes t1 = program_run_times(a, one), t2 = program_run_times(a, two);
        const IndependentRuns independent = independent_runs(a, one, two.workers);
        artel[g].push_back({t1.median_ms, t2.median_ms, t2.sync_ms / (t2.comp_ms + t2.sync_ms),
                            independent.combined_ms, independent.lockstep_ms});
        if (g == a.gemms.front() && !harness.empty()) {  // PyTorch once a round, whatever artel multiplies with
          std::optional<double> p1 = torch_median_ms(a, harness, one), p2 = torch_median_ms(a, harness, two);
          if (p1 && p2) torch.push_back({*p1, *p2, 0}), peer_round = train::summarize_scaling({torch.back()});
        }
        if (a.repeat > 1)
          print_scaling_row(a, w, g, std::string("#").append(std::to_string(round)), steps,
                            train::summarize_scaling({artel[g].back()}), peer_round);
      }
    }
    std::optional<train::ScalingSummary> peer;
    if (!torch.empty()) peer = train::summarize_scaling(torch);
    for (const auto& g : a.gemms) {
      const train::ScalingSummary s = train::summarize_scaling(artel[g]);
      print_scaling_row(a, w, g, a.repeat > 1 ? "median" : "", steps, s, peer);
      if (a.repeat > 1 && !a.json) {
        std::printf("# %s, %s: efficiency per round %.3f .. %.3f", w.c_str(), g.c_str(), s.lowest, s.highest);
        if (peer) std::printf(" (PyTorch %.3f .. %.3f)", peer->lowest, peer->highest);
        std::printf("\n");
      }
    }
  }
}

// Variants of one workload side by side — ZeRO stages on 2 workers x 1
// thread, or recompute modes on 1 worker — each round running every variant
// once, in order, so a slow spell lands on all of them. Prints each variant's
// median ms/step over the rounds, its ratio to the first variant's (the
// per-round ratios' range beside it), and the largest worker's peak
// activations and weights + gradients + optimizer state from the memory report.
void bench_variants(const BenchArgs& a) {
  const bool zero = !a.zero.empty();
  const size_t n = zero ? a.zero.size() : a.recompute.size();
  auto name = [&](size_t v) { return zero ? "zero " + std::to_string(a.zero[v]) : "recompute " + a.recompute[v]; };
  if (!a.json) {
    std::printf("# %s side by side: %s; ratio = median ms/step / the first variant's (per-round range)\n",
                zero ? "ZeRO stages" : "activation recomputation", zero ? "2 workers x 1 thread" : "1 worker");
    std::printf("%s", gemm_lines(a, "").c_str());
    std::printf("%-9s %-20s %6s %9s %7s %17s %12s %10s\n", "workload", "variant", "steps", "ms/step", "ratio", "range",
                "activ_MiB", "held_MiB");
  }
  for (const auto& w : a.workloads) {
    std::vector<std::vector<double>> ms(n);
    std::vector<train::RunTimes> last(n);
    int64_t steps = 0;
    for (int round = 1; round <= a.repeat; ++round)
      for (size_t v = 0; v < n; ++v) {
        train::BenchCase c{.workload = w, .threads = 1, .steps = a.steps, .warmup = a.warmup, .data = "",
                           .workers = zero ? 2 : 1, .gemm = a.gemms.front()};
        if (zero) c.zero = a.zero[v];
        else c.recompute = a.recompute[v];
        steps = train::bench_config(c).steps;
        last[v] = program_run_times(a, c);
        ms[v].push_back(last[v].median_ms);
      }
    for (size_t v = 0; v < n; ++v) {
      std::vector<std::pair<double, double>> rounds;
      for (size_t r = 0; r < ms[v].size(); ++r) rounds.emplace_back(ms[v][r], ms[0][r]);
      const train::RatioOfMedians q = train::ratio_of_medians(rounds);
      const double mib = 1 << 20;
      if (a.json) {
        std::cout << nlohmann::json{{"workload", w}, {"variant", name(v)}, {"steps", steps}, {"median_ms", q.a_ms},
                                    {"ratio", q.ratio}, {"ratio_range", {q.lowest, q.highest}},
                                    {"activation_bytes", last[v].activation_bytes}, {"held_bytes", last[v].held_bytes}}
                         .dump()
                  << std::endl;
        continue;
      }
      char range[40];
      std::snprintf(range, sizeof range, "%.3f .. %.3f", q.lowest, q.highest);
      std::printf("%-9s %-20s %6lld %9.2f %7.3f %17s %12.2f %10.2f\n", w.c_str(), name(v).c_str(),
                  static_cast<long long>(steps), q.a_ms, q.ratio, range, last[v].activation_bytes / mib,
                  last[v].held_bytes / mib);
      std::fflush(stdout);
    }
  }
}

// --scaling, --zero and --recompute each measure fixed cases (2 workers x 1
// thread against 1 x 1; ZeRO stages on 2 x 1; recompute modes on 1 x 1), in
// fp32, and the last two on artel alone: the flags that choose other cases
// would be dropped without a word, so they are refused.
void refuse_flags_without_effect(const CLI::App& app, const BenchArgs& a) {
  auto given = [&](const char* flag) { return app.get_option(flag)->count() > 0; };
  const bool variants = !a.zero.empty() || !a.recompute.empty();
  const std::string mode = a.scaling ? "--scaling" : !a.zero.empty() ? "--zero" : "--recompute";
  if (a.scaling && variants)
    throw Error("--scaling and " + std::string(a.zero.empty() ? "--recompute" : "--zero") + " are two comparisons",
                "run them apart");
  if (!a.scaling && !variants) return;
  const std::string cases = a.scaling           ? "2 workers x 1 thread against 1 x 1, in fp32"
                            : !a.zero.empty()   ? "2 workers x 1 thread, in fp32, on artel alone"
                                                : "1 worker x 1 thread, in fp32, on artel alone";
  // Each with whether its value is what these cases run anyway (a script's `--torch off` changes nothing).
  std::vector<std::pair<const char*, bool>> unused = {{"--threads", a.threads == std::vector<int>{1}},
                                                      {"--precision", a.precisions == std::vector<std::string>{"fp32"}}};
  if (variants)
    unused.insert(unused.end(),
                  {{"--torch", a.torch == "off"}, {"--python", false}, {"--torch-harness", false}, {"--timeout", false}});
  for (const auto& [flag, as_run] : unused)
    if (given(flag) && !as_run)
      throw Error(std::string(flag) + " would do nothing: " + mode + " measures " + cases, std::string("drop ") + flag);
  if (variants && a.gemms.size() > 1)
    throw Error(mode + " measures on one GEMM library, and --gemm gives " + std::to_string(a.gemms.size()),
                "give one --gemm");
}

int run_bench_train(int argc, char** argv) {
  BenchArgs a;
  CLI::App app{"ms/step of W1, W2, the CNN and GPT-2 (median after warmup), next to the PyTorch harness", "artel bench train"};
  app.add_option("--workloads", a.workloads,
                 "w1 (mnist-mlp), w2 (shakespeare-char-gpt), cnn, gpt-50m (8 x 720 GPT, block 256, batch 4; "
                 "with --zero or --recompute), gpt2 (GPT-2 124M, block 256, batch 4, the bundled text's bytes as "
                 "tokens)")->delimiter(',');
  app.add_option("--threads", a.threads, "thread counts to measure")->delimiter(',');
  app.add_option("--gemm", a.gemms,
                 "artel's GEMM libraries to measure, each in every round: onednn (the default, kernels compiled for "
                 "this CPU), openblas (PyTorch's kernels on Debian)")
      ->delimiter(',');
  app.add_option("--precision", a.precisions,
                 "precisions to measure, each on artel and on PyTorch: fp32, bf16 (artel: --precision bf16; "
                 "PyTorch: torch.autocast). With both, each case is also set against PyTorch's fastest")
      ->delimiter(',');
  app.add_option("--steps", a.steps, "steps per run (0 = w1/cnn 124, w2 120, gpt-50m 12, gpt2 8)");
  app.add_option("--warmup", a.warmup, "steps left out of the median (default 20, a quarter of the steps when fewer)");
  app.add_option("--torch", a.torch, "auto | on | off: run the PyTorch harness too");
  app.add_option("--python", a.python, "python with torch");
  app.add_option("--torch-harness", a.harness, "the PyTorch harness (default: the project's tools/torch/train.py)");
  app.add_option("--timeout", a.timeout_s, "seconds one PyTorch run may take")->check(positive());
  app.add_flag("--json", a.json, "one JSON object per measurement");
  app.add_flag("--scaling", a.scaling,
               "data-parallel scaling efficiency instead: `artel train --nproc 2 --threads 1` vs 1 x 1, next to "
               "the harness's --ddp 2 (default workloads w1,w2)");
  app.add_option("--repeat", a.repeat,
                 "rounds, each measuring every case on artel and then PyTorch once (with --scaling: 1 x 1 and 2 x 1 "
                 "of each); reports every round and the medians over rounds (a noisy machine's slow spells then land "
                 "on both sides)");
  app.add_option("--zero", a.zero,
                 "ZeRO stages to compare instead, side by side on `artel train --nproc 2 --threads 1` (e.g. 1,2,3: the "
                 "others' ms/step as a ratio to the first's)")
      ->delimiter(',');
  app.add_option("--recompute", a.recompute,
                 "recompute modes to compare instead, side by side on 1 worker (none,selective,full), with their peak "
                 "activation memory")
      ->delimiter(',');
  if (!parse_flags(app, argc, argv, "see `artel bench train --help`")) return 0;
  ARTEL_CHECK(a.repeat >= 1, "--repeat takes a count >= 1, got ", a.repeat);
  ARTEL_CHECK(a.steps >= 0, "--steps takes a count >= 0 (0 = each workload's own), got ", a.steps);
  ARTEL_CHECK(a.warmup >= 0 || !app.get_option("--warmup")->count(), "--warmup takes a count >= 0, got ", a.warmup);
  ARTEL_CHECK(a.steps == 0 || a.warmup < a.steps || !app.get_option("--warmup")->count(), "--warmup ", a.warmup,
              " leaves none of --steps ", a.steps, " to time");
  ARTEL_CHECK(a.torch == "auto" || a.torch == "on" || a.torch == "off", "--torch takes auto, on or off, got '",
              a.torch, "'");
  for (const auto& w : a.workloads) train::default_bench_steps(w);  // rejects unknown names before any work
  for (int t : a.threads) ARTEL_CHECK(t >= 1, "--threads takes counts >= 1, got ", t);
  for (const auto& g : a.gemms) kernels::parse_gemm_library(g);  // rejects unknown names before any work
  ARTEL_CHECK(!a.gemms.empty(), "--gemm needs at least one library");
  for (const auto& p : a.precisions)
    if (kernels::parse_gemm_precision(p) == kernels::GemmPrecision::bf16) kernels::check_native_bf16();
  ARTEL_CHECK(!a.precisions.empty(), "--precision needs at least one of fp32, bf16");
  ARTEL_CHECK(std::any_of(a.gemms.begin(), a.gemms.end(), [](const std::string& g) { return g == "onednn"; }) ||
                  std::all_of(a.precisions.begin(), a.precisions.end(), [](const std::string& p) { return p == "fp32"; }),
              "--precision bf16 multiplies through oneDNN only (hint: add onednn to --gemm)");

  for (int64_t z : a.zero) ARTEL_CHECK(z >= 0 && z <= 3, "--zero takes stages 0 to 3, got ", z);
  for (const auto& r : a.recompute) nn::parse_recompute(r);  // rejects unknown names before any work
  ARTEL_CHECK(a.zero.empty() || a.recompute.empty(), "--zero and --recompute are two comparisons: run them apart");
  refuse_flags_without_effect(app, a);
  if (!a.zero.empty() || !a.recompute.empty()) {
    if (!app.get_option("--workloads")->count()) a.workloads = {"w2"};
    bench_variants(a);
    return 0;
  }
  std::string why;
  std::string harness = find_torch_harness(a, why);
  if (a.scaling) {
    if (!app.get_option("--workloads")->count()) a.workloads = {"w1", "w2"};
    if (harness.empty() && !a.json) std::printf("# PyTorch: skipped: %s\n", why.c_str());
    bench_scaling(a, harness);
    return 0;
  }
  if (!a.json) {
    if (a.warmup >= 0)
      std::printf("# artel bench train: ms/step = median of the steps after %lld warmup steps\n",
                  static_cast<long long>(a.warmup));
    else
      std::printf("# artel bench train: ms/step = median of the steps after 20 warmup steps (a quarter of the "
                  "steps when fewer)\n");
    std::printf("# PyTorch: %s\n", harness.empty() ? ("skipped: " + why).c_str() : harness.c_str());
    std::printf("%s", gemm_lines(a, harness).c_str());
    std::printf("# gemm_ms: at 1 thread, each timed step's matrix products replayed alone right after it (median), the floor under artel_ms\n");
    if (a.repeat > 1)
      std::printf("# %d rounds, each running every case on artel and then PyTorch; 'median' = the medians over "
                  "rounds and their ratio\n", a.repeat);
    if (std::find(a.precisions.begin(), a.precisions.end(), "bf16") != a.precisions.end())
      std::printf("# bf16: artel's products on %s through %s, attention's %s; PyTorch's under "
                  "torch.autocast(\"cpu\", torch.bfloat16)\n", kernels::bf16_instructions().c_str(),
                  kernels::bf16_kernel_name().c_str(),
                  kernels::attention_products_on_pairs() ? "on bf16 pairs (VDPBF16PS)" : "in fp32 (faster than VDPBF16PS here)");
    if (const std::string slower = kernels::bf16_slower_reason(); !slower.empty() &&
        std::find(a.precisions.begin(), a.precisions.end(), "bf16") != a.precisions.end())
      std::printf("# bf16 runs slower than fp32 here: %s\n", slower.c_str());
    std::printf("%-10s %7s %-8s %-4s %6s %10s %10s %12s %22s %9s\n", "workload", "threads", "gemm", "prec", "steps",
                "artel_ms", "torch_ms", "artel/torch", "artel_rate", "gemm_ms");
  }
  // Round by round, each (workload, threads, precision) on artel with each GEMM library and then once on PyTorch.
  std::map<CaseKey, BenchRounds> rounds;
  for (int round = 1; round <= a.repeat; ++round)
    for (const auto& w : a.workloads)
      for (int t : a.threads)
        for (const auto& p : a.precisions) {
          std::vector<train::BenchResult> runs;
          for (const auto& g : a.gemms)
            if (measurable(g, p))
              runs.push_back(train::bench_artel({.workload = w, .threads = t, .steps = a.steps, .warmup = a.warmup,
                                                 .data = "", .workers = 1, .gemm = g, .precision = p}));
          std::optional<double> peer;
          if (!harness.empty()) peer = torch_median_ms(a, harness, runs.front().bench);
          for (train::BenchResult& r : runs) {
            BenchRounds& seen = rounds[{w, t, r.bench.gemm, p}];
            if (peer) seen.torch_ms.push_back(*peer);
            seen.artel.push_back(std::move(r));
            print_row(a, seen.artel.back(), peer, a.repeat > 1 ? "#" + std::to_string(round) : "");
          }
        }
  std::map<CaseKey, double> artel_ms, torch_ms;  // medians over rounds; PyTorch's under gemm ""
  for (const auto& [key, seen] : rounds) {
    if (a.repeat > 1) print_median_row(a, seen);
    std::vector<double> ms;
    for (const train::BenchResult& r : seen.artel) ms.push_back(r.median_ms);
    artel_ms[key] = train::median_after_warmup(ms, 0);
    if (!seen.torch_ms.empty())
      torch_ms[{std::get<0>(key), std::get<1>(key), "", std::get<3>(key)}] = train::median_after_warmup(seen.torch_ms, 0);
  }
  print_scaling(artel_ms, a);
  print_against_fastest(artel_ms, torch_ms, a);
  return 0;
}

const bool kBenchTrainRegistered =
    register_bench("train", "ms/step of W1, W2, the CNN and GPT-2 at 1 and 2 threads, next to PyTorch", run_bench_train);

}  // namespace

}  // namespace artel::cli
