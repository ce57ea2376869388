// Cluster: the machines a plan runs on — hosts, workers per host, each
// worker's compute and memory, and the two kinds of link between workers
// (inside a host, between hosts), each by the alpha-beta model: a message of
// S bytes over a link takes alpha + S / beta seconds.
//
// Read from JSON (docs/PLAN.md; data/clusters/selene.json). Every number is
// either plain or {"value": x, "source": "where it comes from"}; the sources
// travel with the cluster so a report can say where each rate came from.
// A file `artel plan calibrate` wrote adds measured GEMM rates by shape
// (which gemm_seconds() prefers over peak × efficiency), the fused attention
// core's times, the host's cores and a worker's own memory.
//
//   Cluster c = read_cluster("data/clusters/selene.json");
//   c.workers();                                       // hosts × workers_per_host
//   gemm_seconds(c.device, Precision::bf16, 2048, 12288, 36864);
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace artel::plan {

enum class Precision { fp32, bf16 };
Precision parse_precision(const std::string& name);  // "fp32" | "bf16"
const char* precision_name(Precision p);

// A number and where it comes from.
struct Sourced {
  double value = 0;
  std::string source;
};

// One measured (or vendor-published) matrix product: C (m×n) += A (m×k)·B (k×n).
struct GemmRate {
  Precision precision = Precision::bf16;
  int64_t m = 0, n = 0, k = 0;
  double flops_per_s = 0;
  std::string source;  // how it was measured (`artel plan calibrate` writes one); may be empty
};

// One measured fused attention core (artel's kernels/attention.h: scores,
// causal softmax and P·V in one kernel, its products in bf16 under --precision
// bf16): seconds of its forward and of its backward for one (sequence, head)
// item.
struct AttentionRate {
  int64_t seq = 0, head_size = 0;
  double forward_s = 0, backward_s = 0;
  std::string source;
  Precision precision = Precision::fp32;  // files written before bf16 attention hold fp32 only
};

struct Device {
  std::string name;
  Sourced peak_fp32;                 // FLOP/s of fp32 matrix products
  Sourced peak_bf16;                 // FLOP/s of bf16 matrix products (dense)
  Sourced gemm_efficiency;           // achieved / peak for large products, when no table entry applies
  std::vector<GemmRate> gemm_table;  // calibrated rates by shape; empty for vendor-spec files
  // Calibrated fused attention; empty for vendor-spec files, whose attention
  // core is its per-head products and softmax streams (stage_work.h).
  std::vector<AttentionRate> attention_table;
  Sourced memory_bytes;              // what one worker may hold
  // What a worker's program holds before its model (code, libraries, data):
  // measured by `artel plan calibrate`; 0 (absent) in vendor-spec files.
  Sourced runtime_bytes;
  // The same for a worker with others on its host, which also holds its
  // groups' threads and the scratch pages of their shared segment (W2: 31
  // MiB on 2 workers against 28 alone); 0 (absent): runtime_bytes. The pages
  // of its peers' registered buckets are not in it: they depend on the
  // layout, and the planner adds them (Note [Peers' registered pages]).
  Sourced runtime_bytes_with_peers;
  Sourced memory_bandwidth;          // bytes/s of its memory, for the kernels that only stream data
  Sourced memory_efficiency;         // achieved / peak for those streaming kernels
};

struct Link {
  Sourced alpha;  // seconds per message (per ring step)
  Sourced beta;   // bytes/s one worker sends over it, each way
};

struct Cluster {
  std::string name;
  Sourced hosts;
  Sourced workers_per_host;
  // CPU hosts only (0: absent, a worker is a whole device such as a GPU): the
  // cores of a host, which its workers share. The device's rates are then
  // one core's, measured on one thread (`artel plan calibrate`), and a worker
  // runs at worker_speed() times them.
  Sourced cores_per_host;
  Device device;
  Link intra_host;  // between two workers of one host
  Link inter_host;  // one worker's own share of its host's network, to another host

  int64_t host_count() const { return static_cast<int64_t>(hosts.value); }
  int64_t per_host() const { return static_cast<int64_t>(workers_per_host.value); }
  int64_t workers() const { return host_count() * per_host(); }
  // The same machines, `workers` of them (a job on part of the cluster):
  // whole hosts, so `workers` must be a multiple of workers_per_host (or
  // fewer than one host holds).
  Cluster with_workers(int64_t workers) const;
  void validate() const;  // throws Error naming the first bad number
};

// How many of the device's rates one worker gets: 1 on a cluster without
// cores_per_host; on CPU hosts, the cores its `threads` can keep busy when the
// host's workers share its cores, min(threads, cores_per_host / workers on
// the host) — 2 workers of 1 thread on 2 cores run at 1 core each, 4 at
// half a core (the kernel time-slices them). threads 0 means what `artel
// train --nproc` picks: max(1, cores / workers). Linear in cores: artel
// splits each product and kernel over its threads (kernels/gemm.h).
double worker_speed(const Cluster& c, int64_t threads);
// The same cluster with every device rate (peaks, GEMM and attention tables,
// memory bandwidth) multiplied by `speed`: what one worker of a shared host gets.
Cluster with_worker_speed(const Cluster& c, double speed);
// Whether a CPU host's workers outnumber its cores, so the kernel
// time-slices them: a worker then never idles while another on its core
// could run, and work it does beside its computation (a collective's
// copies) lengthens its step (Note [A collective's copies], collective_cost.h).
bool time_sliced(const Cluster& c);
// Whether a CPU host leaves a core free of its workers' `threads` (threads
// 0 as in worker_speed), where their collectives' progress thread runs
// beside the computation, as comm/progress.h decides: workers × threads <
// cores. Hosts of whole devices: no (their published runs, DeepSpeed's and
// Megatron's, gather ZeRO's weights after the update).
bool spare_core(const Cluster& c, int64_t threads);
// Seconds to read or write `bytes` once at the device's streaming rate
// (memory bandwidth × memory efficiency): a memory-bound pass.
double streaming_seconds(const Device& device, double bytes);

// Seconds of one matrix product on one worker: the calibrated rate of the
// nearest table entry of the same precision (by log-distance of m, n, k; no
// interpolation — `artel plan calibrate` measures the exact shapes of artel's
// GPTs, and between two measured shapes a CPU's rate is not smooth enough in
// m, n, k for interpolation to beat the nearest one), else the roofline max(2·m·n·k / (peak × gemm_efficiency),
// (m·k + k·n + m·n)·element bytes / (memory bandwidth × memory efficiency)).
double gemm_seconds(const Device& device, Precision precision, double m, double n, double k);
// Seconds of `items` (sequences × heads) of the fused attention core at
// (seq, head_size): the entry nearest in log-distance, scaled by the FLOPs
// ratio seq²·head_size; nothing when the table is empty.
struct AttentionSeconds {
  double forward = 0, backward = 0;
};
// From the nearest entry of `precision` (or, where the table has none of it,
// the nearest of any); none without a table.
std::optional<AttentionSeconds> attention_seconds(const Device& device, Precision precision, double items, double seq,
                                                  double head_size);
// Peak × efficiency: the rate of a large product with no table entry.
double achieved_flops(const Device& device, Precision precision);

Cluster parse_cluster(const nlohmann::json& j, const std::string& origin);
Cluster read_cluster(const std::string& path);  // throws Error naming the file
nlohmann::ordered_json to_json(const Cluster& c);

}  // namespace artel::plan
