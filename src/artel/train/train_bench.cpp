#include "artel/train/train_bench.h"

#include <algorithm>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "artel/core/error.h"
#include "artel/train/bundled_data.h"
#include "artel/train/trainer.h"

namespace artel::train {

namespace {
constexpr int64_t kW1StepsPerEpoch = 62;  // 8000 images / batch 128, last partial batch dropped
}

int64_t default_bench_steps(const std::string& workload) {
  if (workload == "w2") return 120;
  if (workload == "w1" || workload == "cnn") return 2 * kW1StepsPerEpoch;
  if (workload == "gpt-50m") return 12;
  if (workload == "gpt2") return 8;
  throw Error("unknown workload '" + workload + "'", "use w1, w2, cnn, gpt-50m or gpt2");
}

int64_t warmup_steps(int64_t steps) { return std::min<int64_t>(20, steps / 4); }

int64_t bench_warmup(const BenchCase& c) {
  if (c.warmup >= 0) return c.warmup;
  return warmup_steps(c.steps > 0 ? c.steps : default_bench_steps(c.workload));
}

TrainConfig bench_config(const BenchCase& c) {
  int64_t steps = c.steps > 0 ? c.steps : default_bench_steps(c.workload);
  ARTEL_CHECK(c.threads >= 1, "threads must be >= 1, got ", c.threads);
  const int64_t warmup = bench_warmup(c);
  ARTEL_CHECK(warmup < steps, "warmup (", warmup, ") must be in [0, steps = ", steps, ")");
  const bool gpt = c.workload == "w2" || c.workload == "gpt-50m" || c.workload == "gpt2";
  TrainConfig cfg = default_config(gpt ? "gpt" : c.workload == "w1" ? "mlp" : "cnn");
  if (c.workload == "gpt2") {  // nanoGPT's GPT-2 124M and recipe on 4 x 256 tokens
    apply_preset(cfg, "gpt2");
    cfg.block_size = 256;
    cfg.batch_size = 4;
    cfg.warmup_steps = 0;
  }
  if (c.workload == "gpt-50m") {  // the ZeRO paper's terms measured on it (tools/zero_bytes_per_parameter.py)
    cfg.n_layer = 8;
    cfg.n_head = 12;
    cfg.n_embd = 720;
    cfg.block_size = 256;
    cfg.batch_size = 4;
  }
  cfg.steps = steps;
  cfg.threads = c.threads;
  cfg.gemm = c.gemm;
  cfg.precision = c.precision;
  cfg.generate = 0;
  cfg.data = !c.data.empty() ? c.data : c.workload == "gpt2" ? bench_token_file() : default_data_for(cfg.model);
  if (c.zero >= 0) cfg.zero = c.zero;
  if (!c.recompute.empty()) cfg.recompute = c.recompute;
  cfg.validate();
  return cfg;
}

double median_after_warmup(const std::vector<double>& ms, int64_t warmup) {
  ARTEL_CHECK(warmup >= 0 && static_cast<size_t>(warmup) < ms.size(), "no steps left after a warmup of ", warmup,
              " out of ", ms.size());
  std::vector<double> t(ms.begin() + warmup, ms.end());
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

BenchResult bench_artel(const BenchCase& c) {
  TrainConfig cfg = bench_config(c);
  std::ostringstream quiet;
  RunOptions run;
  run.out = &quiet;
  run.write_files = false;
  run.evaluate = false;
  run.sample = false;
  const int64_t warmup = bench_warmup(c);
  // At 1 thread every product runs on this thread, where the recorder sees it.
  // The floor is measured side by side with the steps: after each timed step,
  // its products are replayed once, so a machine that speeds up or slows down
  // during the run (other tenants, clocks) moves steps and floor alike. In
  // three GPT-2 runs the step/floor ratio read 1.146, 1.146, 1.170 this way
  // and 1.191, 1.099, 1.168 against three replays back to back after the run.
  std::optional<kernels::GemmRecorder> products;
  GemmReplay replay;
  std::vector<double> floor_ms;
  // The first replay, after the second-to-last warmup step, makes the
  // scratch; the last warmup step then faults back in the buffers it displaced.
  run.after_step = [&](int64_t k) {
    if (!products || k < warmup - 1) return;
    std::vector<kernels::GemmArgs> last = last_step_products(products->calls(), k);
    kernels::GemmRecorder aside;  // the replay's products are not the step's
    if (last.empty()) return;
    const double ms = replay.ms(std::move(last), 1);
    if (k > warmup) floor_ms.push_back(ms);
  };
  Trainer trainer(cfg, run);
  if (c.threads == 1) products.emplace();
  RunSummary s = trainer.run();
  BenchResult r;
  if (!floor_ms.empty() && static_cast<int64_t>(floor_ms.size()) == cfg.steps - warmup)
    r.gemm_ms = median_after_warmup(floor_ms, 0);
  r.bench = c;
  r.bench.steps = cfg.steps;
  r.median_ms = median_after_warmup(s.step_ms, warmup);
  r.timed_steps = static_cast<int64_t>(s.step_ms.size()) - warmup;
  r.mean_ms = std::accumulate(s.step_ms.begin() + warmup, s.step_ms.end(), 0.0) / static_cast<double>(r.timed_steps);
  r.items_per_s = static_cast<double>(trainer.items_per_step()) / (r.median_ms / 1e3);
  r.final_loss = s.losses.back();
  return r;
}

std::vector<kernels::GemmArgs> last_step_products(const std::vector<kernels::GemmArgs>& calls, int64_t steps) {
  if (steps <= 0 || calls.empty() || calls.size() % static_cast<size_t>(steps) != 0) return {};
  return {calls.end() - static_cast<int64_t>(calls.size()) / steps, calls.end()};
}

double GemmReplay::ms(std::vector<kernels::GemmArgs> step, int repeats) {
  ARTEL_CHECK(!step.empty() && repeats >= 1, "a replay needs products and repeats >= 1");
  int64_t a = 0, b = 0, c = 0;
  for (const kernels::GemmArgs& g : step) {
    a = std::max(a, (g.trans_a ? g.k : g.m) * g.lda);
    b = std::max(b, (g.trans_b ? g.n : g.k) * g.ldb);
    c = std::max(c, g.m * g.ldc);
  }
  if (!scratch_.defined() || scratch_.numel() < a + b + c) {
    scratch_ = Tensor();  // freed before its successor is made, so the two are never held at once
    scratch_ = Tensor::empty({a + b + c}, DType::f32);
  }
  float* s = scratch_.data<float>();
  std::fill_n(s, a + b + c, 0.01f);
  const bool bf16 = std::any_of(step.begin(), step.end(), [](const kernels::GemmArgs& g) { return g.a16 || g.b16; });
  if (bf16) rounded_.assign(static_cast<size_t>(std::max(a, b)), 0x3c24);  // 0.01 in bf16; fp32 products never read it
  for (kernels::GemmArgs& g : step) {
    g.a = s, g.b = s + a, g.c = s + a + b, g.bias = g.bias ? s : nullptr;
    g.a16 = g.a16 ? rounded_.data() : nullptr, g.b16 = g.b16 ? rounded_.data() : nullptr;  // rounded before the step's products
  }
  std::vector<double> ms;
  for (int i = 0; i < repeats; ++i) {
    auto start = std::chrono::steady_clock::now();
    for (const kernels::GemmArgs& g : step) kernels::gemm(g);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  return median_after_warmup(ms, 0);
}

double replay_gemms_ms(std::vector<kernels::GemmArgs> step, int repeats) {
  return GemmReplay().ms(std::move(step), repeats);
}

std::string bench_token_file() {
  const std::string text = find_bundled_data("tinyshakespeare.txt");
  const std::filesystem::path path = std::filesystem::temp_directory_path() / "artel-bench-tinyshakespeare-bytes.bin";
  std::error_code ec;
  const auto text_bytes = std::filesystem::file_size(text);
  if (std::filesystem::file_size(path, ec) == 2 * text_bytes && !ec) return path.string();
  std::ifstream in(text, std::ios::binary);
  std::vector<uint16_t> ids;
  for (char ch; in.get(ch);) ids.push_back(static_cast<unsigned char>(ch));
  ARTEL_CHECK(ids.size() == text_bytes, "cannot read ", text);
  // Written aside and renamed, so a concurrent benchmark never reads half a file.
  const std::string aside = path.string() + "." + std::to_string(getpid());
  {
    std::ofstream out(aside, std::ios::binary);
    out.write(reinterpret_cast<const char*>(ids.data()), static_cast<std::streamsize>(2 * ids.size()));
    ARTEL_CHECK(out.good(), "cannot write ", aside);
  }
  std::filesystem::rename(aside, path);
  return path.string();
}

std::vector<std::string> torch_harness_command(const std::string& python, const std::string& train_py,
                                               const BenchCase& c) {
  if (c.workload != "w1" && c.workload != "cnn" && c.workload != "w2" && c.workload != "gpt2") return {};
  int64_t steps = c.steps > 0 ? c.steps : default_bench_steps(c.workload);
  std::vector<std::string> argv = {python, train_py, "--threads", std::to_string(c.threads), "--warmup",
                                   std::to_string(bench_warmup(c))};
  if (c.precision != "fp32") {
    if (c.workload == "w1" || c.workload == "cnn") return {};  // the harness's autocast is for its GPTs
    argv.insert(argv.end(), {"--precision", c.precision});
  }
  if (c.workers > 1) argv.insert(argv.end(), {"--ddp", std::to_string(c.workers)});
  if (c.workload == "w1" || c.workload == "cnn") {  // MNIST epochs of 62 steps
    int64_t epochs = (steps + kW1StepsPerEpoch - 1) / kW1StepsPerEpoch;
    argv.insert(argv.end(), {"--workload", c.workload == "w1" ? "mnist-mlp" : "mnist-cnn", "--epochs",
                             std::to_string(epochs)});
  } else if (c.workload == "w2") {
    argv.insert(argv.end(), {"--workload", "shakespeare-char-gpt", "--iters", std::to_string(steps), "--eval-at",
                             std::to_string(steps)});
  } else {
    argv.insert(argv.end(), {"--workload", "gpt2", "--iters", std::to_string(steps), "--eval-at", "", "--data-file",
                             c.data.empty() ? bench_token_file() : c.data});
  }
  return argv;
}

std::vector<std::string> config_flags(const TrainConfig& cfg) {
  std::vector<std::string> flags;
  const nlohmann::json j = cfg.to_json();  // items() refers to it: it must outlive the loop
  for (const auto& [key, v] : j.items()) {
    std::string text = v.is_string() ? v.get<std::string>() : v.dump();
    if (text.empty()) continue;
    flags.insert(flags.end(), {flag_of(key), text});
  }
  return flags;
}

RatioOfMedians ratio_of_medians(const std::vector<std::pair<double, double>>& rounds) {
  ARTEL_CHECK(!rounds.empty(), "ratio of medians over no rounds");
  std::vector<double> a, b, ratio;
  for (const auto& [x, y] : rounds) a.push_back(x), b.push_back(y), ratio.push_back(x / y);
  RatioOfMedians m;
  m.a_ms = median_after_warmup(a, 0);
  m.b_ms = median_after_warmup(b, 0);
  m.ratio = m.a_ms / m.b_ms;
  m.lowest = *std::min_element(ratio.begin(), ratio.end());
  m.highest = *std::max_element(ratio.begin(), ratio.end());
  return m;
}

ScalingSummary summarize_scaling(const std::vector<ScalingRound>& rounds) {
  ARTEL_CHECK(!rounds.empty(), "scaling summary of no rounds");
  std::vector<std::pair<double, double>> times;
  std::vector<double> share, independent, lockstep;
  for (const ScalingRound& r : rounds) {
    times.emplace_back(r.one_ms, r.many_ms), share.push_back(r.sync_share);
    if (r.independent_ms > 0) independent.push_back(r.independent_ms);
    if (r.lockstep_ms > 0) lockstep.push_back(r.lockstep_ms);
  }
  const RatioOfMedians m = ratio_of_medians(times);
  ScalingSummary s{.one_ms = m.a_ms, .many_ms = m.b_ms, .efficiency = m.ratio, .lowest = m.lowest,
                   .highest = m.highest, .sync_share = median_after_warmup(share, 0)};
  if (independent.size() == rounds.size()) s.independent_efficiency = m.a_ms / median_after_warmup(independent, 0);
  if (lockstep.size() == rounds.size()) s.lockstep_efficiency = m.a_ms / median_after_warmup(lockstep, 0);
  return s;
}

double combined_step_ms(const std::vector<double>& medians_ms) {
  ARTEL_CHECK(!medians_ms.empty(), "combined step time of no runs");
  double per_ms = 0;  // steps per ms, summed over the runs
  for (double ms : medians_ms) {
    ARTEL_CHECK(ms > 0, "a run's median step time must be > 0, got ", ms);
    per_ms += 1 / ms;
  }
  return static_cast<double>(medians_ms.size()) / per_ms;
}

double lockstep_step_ms(const std::vector<std::vector<double>>& runs_ms) {
  ARTEL_CHECK(!runs_ms.empty(), "lockstep pace of no runs");
  size_t steps = runs_ms.front().size();
  for (const auto& run : runs_ms) steps = std::min(steps, run.size());
  ARTEL_CHECK(steps > 0, "lockstep pace of runs with no timed steps");
  std::vector<double> slowest(steps, 0.0);
  for (const auto& run : runs_ms)
    for (size_t i = 0; i < steps; ++i) slowest[i] = std::max(slowest[i], run[i]);
  return median_after_warmup(slowest, 0);
}

RunTimes read_run_times(const std::string& metrics_jsonl, int64_t warmup) {
  std::ifstream in(metrics_jsonl);
  if (!in) throw Error("cannot read " + metrics_jsonl, "the benchmark run wrote no metrics");
  std::vector<double> step_ms;
  double comp = 0, sync = 0;
  RunTimes t;
  for (std::string line; std::getline(in, line);) {
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.contains("memory"))
      for (const nlohmann::json& m : j["memory"]) {
        t.activation_bytes = std::max(t.activation_bytes, m.value("activations", int64_t{0}));
        t.held_bytes = std::max(t.held_bytes, m.value("parameters", int64_t{0}) + m.value("gradients", int64_t{0}) +
                                                  m.value("optimizer_state", int64_t{0}));
      }
    if (!j.is_object() || !j.contains("step_ms")) continue;
    step_ms.push_back(j["step_ms"].get<double>());
    if (static_cast<int64_t>(step_ms.size()) <= warmup) continue;
    comp += j.value("t_comp_ms", 0.0);
    sync += j.value("t_sync_ms", 0.0);
  }
  t.median_ms = median_after_warmup(step_ms, warmup);
  t.timed_ms.assign(step_ms.begin() + warmup, step_ms.end());
  const double timed = static_cast<double>(step_ms.size()) - static_cast<double>(warmup);
  t.comp_ms = comp / timed;
  t.sync_ms = sync / timed;
  return t;
}

std::optional<double> parse_peer_median_ms(const std::string& line) {
  nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || j.value("event", "") != "summary" || !j.contains("median_ms") ||
      !j["median_ms"].is_number())
    return std::nullopt;
  return j["median_ms"].get<double>();
}

}  // namespace artel::train
