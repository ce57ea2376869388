// The measurements behind `artel plan calibrate`: this machine's rates as the
// planner's cluster file holds them (plan/cluster.h), each with a source
// naming what measured it, when, with which command and on which CPU.
//
//   - GEMM rates by shape: one step of each GPT artel trains (W2, the 50M
//     GPT of `artel bench train`'s gpt-50m, GPT-2 at block 256) run at one
//     thread under kernels::GemmRecorder, then every distinct product replayed
//     alone (train::GemmReplay), all of them in interleaved rounds, fp32
//     and, where the CPU multiplies it natively, bf16;
//   - the fused attention core (kernels/attention.h), which runs outside the
//     GEMM library: forward and backward per (sequence, head) at each GPT's
//     sequence and head size;
//   - memory bandwidth: a triad over buffers far larger than the caches, at
//     one thread, and the fraction of it artel's own streaming kernels
//     (GELU, layer norm) reach: memory_efficiency;
//   - the program's own memory (runtime_bytes): a short W2 run's peak
//     resident set less what its memory report counts;
//   - the intra-host link: `artel bench comm`'s all-reduce over shared memory
//     between two forked workers, fitted to the ring's alpha-beta cost.
//
// Rates are one core's: the file's cores_per_host says how many the workers share.
//
//   MachineFacts facts = this_machine_facts("artel plan calibrate --out me.json");
//   plan::Cluster c = calibrate_machine(facts, {.workers = 2});
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "artel/plan/cluster.h"

namespace artel::cli {

// What a source string says about the measurement.
struct MachineFacts {
  std::string cpu;      // /proc/cpuinfo's model name
  std::string when;     // UTC, ISO 8601
  std::string command;  // the command line that measured it
  std::string source(const std::string& what) const;  // "measured: WHAT; CPU; when; command"
};
MachineFacts this_machine_facts(const std::string& command);

struct CalibrationOptions {
  int workers = 0;  // workers_per_host of the file; 0 = the cores
  std::vector<std::string> workloads = {"w2", "gpt-50m", "gpt2"};
  std::string artel_program;  // the `artel` binary that runs `bench comm`; "" = this process's
  // A cluster harness on this machine (scripts/cluster.sh): `hosts` hosts
  // that share its cores, and the launcher that runs a command on them, with
  // {ranks} standing for the ranks of each host ("2" or "1,1"). The links
  // are then MPI all-reduces through it: 2 ranks on one host, and 1 on
  // each of two hosts.
  int hosts = 1;
  std::string hosts_command;
};

// One step of `workload` (train_bench.h's names) at `batch` sequences.
struct GemmStep {
  std::string workload;
  int64_t batch = 1;
};
// Every distinct product of each step, timed alone at one thread, all of
// them in interleaved rounds (Note [Interleaved GEMM rounds]): one entry per
// step and shape.
std::vector<plan::GemmRate> measure_gemm_rates(const std::vector<GemmStep>& steps, plan::Precision precision,
                                               const MachineFacts& facts);
// artel's fused attention core (kernels/attention.h) at the workload's
// sequence and head size, one thread: seconds of forward and of backward
// per (sequence, head) item.
plan::AttentionRate measure_attention(const std::string& workload, plan::Precision precision, const MachineFacts& facts);
// Bytes/s of one thread's triad a[i] = b[i] + s·c[i] (3 × 4 bytes an element).
double measure_memory_bandwidth();
// alpha (s) and beta (bytes/s) of a link from `bench(sizes)`, the command
// of an `artel bench comm --op all_reduce ... --json` between two workers
// across it given its size flags: fitted to 2·alpha + S/beta, alpha from
// 8 bytes and beta from 16 MiB, the fastest of three runs (`what`, e.g.
// "shared-memory", names the all-reduce in the sources).
using BenchCommand = std::function<std::string(const std::string& sizes)>;
plan::Link measure_link(const BenchCommand& bench, const std::string& what, const MachineFacts& facts);

// Bytes/s one thread's GELU and layer norm (forward and backward) move,
// counted as the planner counts their bytes: the rate of artel's streaming
// kernels, below the triad's where they compute as they stream.
double measure_kernel_stream_rate();
// What a calibration run's workers hold because of its layout, which the
// planner adds back for each layout: bytes from a worker's entry of the
// memory report, and what they are, for the source.
struct LayoutPages {
  std::function<double(const nlohmann::json& worker_memory)> bytes;
  std::string what;
};
// A worker's own memory before its model: peak resident set less the memory
// report's kinds and `layout_pages` (the most of any worker), of a 24-step W2
// run of `train_command` (`artel train`, or it launched on a harness) on
// every core.
plan::Sourced measure_runtime_bytes(const std::string& train_command, const MachineFacts& facts,
                                    const LayoutPages& layout_pages = {});

plan::Cluster calibrate_machine(const MachineFacts& facts, const CalibrationOptions& options);

}  // namespace artel::cli
