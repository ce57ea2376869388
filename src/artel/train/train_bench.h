// Training benchmarks: ms per step of the baselines' workloads (W1 mnist-mlp,
// W2 shakespeare-char-gpt, and the CNN), measured the way the PyTorch harness
// tools/torch/train.py measures them — wall time of a whole step (batch,
// forward, backward, update), the median over the steps after a warmup — so
// the two can be compared as a ratio in the same run.
//
//   BenchResult r = bench_artel({.workload = "w2", .threads = 1, .steps = 120});
//   r.median_ms;
//   auto cmd = torch_harness_command("/usr/bin/python3", "tools/torch/train.py", r.bench);   // its argv
//   std::optional<double> ms = parse_peer_median_ms(line);        // from its "summary" line
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "artel/core/tensor.h"
#include "artel/kernels/gemm.h"
#include "artel/train/train_config.h"

namespace artel::train {

struct BenchCase {
  // w1 | w2 | cnn | gpt-50m (the 8 x 720 GPT at block 256, batch 4) | gpt2
  // (--preset gpt2, 124M, at block 256, batch 4, on bench_token_file())
  std::string workload = "w2";
  int threads = 1;              // >= 1
  int64_t steps = 0;            // steps to run; 0 = the workload's default_bench_steps
  int64_t warmup = -1;          // first steps left out of the median, < steps; -1 = bench_warmup's
  std::string data;             // "" = the bundled data (gpt2: bench_token_file())
  int workers = 1;              // data-parallel processes (scaling: `artel train --nproc`, the harness's --ddp)
  std::string gemm = "onednn";  // the GEMM library (kernels/gemm.h); PyTorch keeps its own
  std::string precision = "fp32";  // fp32 | bf16 (--precision); the harness: bf16 = torch.autocast's
  int64_t zero = -1;            // --zero of the run; -1 = the recipe's
  std::string recompute;        // --recompute of the run; "" = the recipe's
};

struct BenchResult {
  BenchCase bench;
  double median_ms = 0;   // median step time after warmup
  double mean_ms = 0;
  int64_t timed_steps = 0;
  double items_per_s = 0; // samples (w1, cnn) or tokens (w2) per second at the median
  double final_loss = 0;  // the last step's loss, a sanity check that it trained
  double gemm_ms = 0;     // 1 thread: each timed step's GEMMs replayed alone after it, median (0: not measured)
};

// The recipe of a workload (baselines.md), to run `steps` steps on `threads`
// threads with no files, evaluations or sampling. Throws on an unknown workload.
TrainConfig bench_config(const BenchCase& c);
int64_t default_bench_steps(const std::string& workload);
// c.warmup, or by default 20 steps, a quarter of the steps when that is fewer.
int64_t bench_warmup(const BenchCase& c);
// The first steps a run of `steps` leaves out of its medians as warm-up: a
// quarter of them, at most 20 (bench_warmup's default; a traced run's step phases).
int64_t warmup_steps(int64_t steps);

BenchResult bench_artel(const BenchCase& c);

// The last step's matrix products out of `calls` recorded over `steps`
// steps that each made the same ones: the last calls / steps of them. Empty
// when the calls do not split evenly into steps.
std::vector<kernels::GemmArgs> last_step_products(const std::vector<kernels::GemmArgs>& calls, int64_t steps);
// Median milliseconds of `calls` run one after another `repeats` times on
// scratch operands (their shapes, strides and transposes; their own
// pointers are not read): the benchmark's floor of a step's products, and
// `artel plan calibrate`'s rate of one shape.
//
// The scratch is kept from one replay to the next. GPT-2's is 0.57 GB: made
// afresh after every step, it took the place of the step's kept large
// buffers (Note [Large buffers], core/tensor.cpp), so the next step faulted
// its 206 MB logits gradient in again, and the benchmark timed page faults
// that `artel train` never pays.
class GemmReplay {
 public:
  double ms(std::vector<kernels::GemmArgs> calls, int repeats);

 private:
  Tensor scratch_;
  std::vector<uint16_t> rounded_;
};

// One replay on scratch of its own.
double replay_gemms_ms(std::vector<kernels::GemmArgs> calls, int repeats);

// The harness's statistic: sorted(t[warmup:])[len // 2]. Throws when nothing is left.
double median_after_warmup(const std::vector<double>& ms, int64_t warmup);

// The token file of the gpt2 workload: the bundled text's bytes as uint16
// token ids (nanoGPT's raw layout; a byte-level vocabulary inside GPT-2's
// 50,257), written once to the temporary folder and reused.
std::string bench_token_file();

// argv for the PyTorch harness running the same workload; {} for "cnn" and
// "gpt-50m" (not compared: the harness's --workload mnist-cnn runs the CNN by hand). W1 runs
// ceil(steps / 62) epochs of 62 steps.
std::vector<std::string> torch_harness_command(const std::string& python, const std::string& train_py,
                                               const BenchCase& c);

// Data-parallel scaling (`artel bench train --scaling`): the run goes through
// the real program (`artel train [--nproc W] FLAGS --out DIR`) and its step
// times come back from DIR/metrics.jsonl (rank 0's). Efficiency =
// throughput(W workers) / (W · throughput(1 worker)) = median_1 / median_W, as
// the per-worker batch stays the same.
//
// "--key value" for every key of `cfg` (empty strings left out).
std::vector<std::string> config_flags(const TrainConfig& cfg);

struct RunTimes {
  double median_ms = 0;  // median step_ms after warmup
  std::vector<double> timed_ms;  // step_ms of each step after warmup, in order
  double comp_ms = 0;    // mean t_comp_ms after warmup (0 without data parallelism)
  double sync_ms = 0;    // mean exposed t_sync_ms after warmup
  int64_t activation_bytes = 0;  // the memory report's peak activations, largest worker (0 without one)
  int64_t held_bytes = 0;        // and its weights + gradients + optimizer state
};
// Reads the step lines of a metrics.jsonl; throws when fewer than warmup + 1.
RunTimes read_run_times(const std::string& metrics_jsonl, int64_t warmup);

// Rounds of a comparison (`--repeat N`): each round times both sides (artel
// and PyTorch, or 1 worker and W workers) one after the other, so a slow spell
// of a noisy machine lands on both sides of one round rather than on one side
// of the comparison. The summary takes the median of each side over the
// rounds and their ratio, next to the lowest and highest per-round ratio.
struct RatioOfMedians {
  double a_ms = 0, b_ms = 0, ratio = 0, lowest = 0, highest = 0;  // ratio = a_ms / b_ms
};
// rounds: (a, b) per round. Throws on no rounds.
RatioOfMedians ratio_of_medians(const std::vector<std::pair<double, double>>& rounds);

// A scaling measurement's rounds: efficiency = the ratio of the 1-worker and
// W-worker medians.
struct ScalingRound {
  double one_ms = 0, many_ms = 0;  // median step time at 1 and at W workers
  double sync_share = 0;           // exposed T_sync / (T_comp + T_sync) at W workers (0: not measured)
  // W independent 1-worker runs at once (no communication): the step time of
  // their combined throughput, W / sum(1 / median_i). 0: not measured.
  double independent_ms = 0;
  // Their pace in lockstep (lockstep_step_ms): what W workers that wait for
  // each other every step could reach with free communication. 0: not measured.
  double lockstep_ms = 0;
};
struct ScalingSummary {
  double one_ms = 0, many_ms = 0, efficiency = 0, lowest = 0, highest = 0, sync_share = 0;
  // one_ms / the median independent_ms: the efficiency the machine itself
  // allows W workers with free communication. 0: not measured.
  double independent_efficiency = 0;
  // one_ms / the median lockstep_ms: what W workers in lockstep (synchronous
  // data parallelism) could reach with free communication. Below
  // independent_efficiency where the cores differ in speed (on a 2-vCPU AMD
  // Zen 5 guest the second vCPU ran W1 7-12% and GPT-2 3-10% slower than the
  // first, each pinned with the other idle) and where steps jitter. 0: not
  // measured.
  double lockstep_efficiency = 0;
};
// The step time of W runs' combined throughput, from their median step times.
double combined_step_ms(const std::vector<double>& medians_ms);
// The pace of runs made to wait for each other every step, from their
// timed steps run side by side: the median over steps i of the slowest run's
// step i (over the steps every run has). Workers in lockstep pay each step's
// slowest, not the slowest median: two runs whose steps jitter independently
// around the same median are slower in lockstep than either alone. Throws on
// no runs or no steps.
double lockstep_step_ms(const std::vector<std::vector<double>>& runs_ms);
// Throws on no rounds.
ScalingSummary summarize_scaling(const std::vector<ScalingRound>& rounds);

// median_ms of the harness's {"event": "summary", ...} line; nullopt for any other line.
std::optional<double> parse_peer_median_ms(const std::string& line);

}  // namespace artel::train
