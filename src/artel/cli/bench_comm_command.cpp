// `artel bench comm`: the collective benchmark (comm/bench_collective.h) with
// nccl-tests' columns. With --backend shm and not launched as a worker, it
// forks its -n workers itself; under `artel launch` (ARTEL_* set) or mpirun
// (--backend mpi) each process is one rank. Exits 1 on an error and 3 if any
// result was wrong.
//
//   artel bench comm --op all_reduce --backend shm -n 2 --max-bytes 256M
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include "artel/cli/bench_registry.h"
#include "artel/cli/parse_flags.h"
#include "artel/comm/bench_collective.h"
#include "artel/comm/hosts.h"

namespace artel::cli {
namespace {

size_t parse_bytes(const std::string& s) {
  auto refuse = [&] { return Error("cannot read '" + s + "' as a size", "use e.g. 8, 64K, 16M, 1G (at most 1T)"); };
  // stoull reads "-1" as 2^64 - 1: a benchmark of that size grew its memory until killed.
  if (s.empty() || !std::isdigit(static_cast<unsigned char>(s[0]))) throw refuse();
  size_t pos = 0;
  unsigned long long v = 0;
  try {
    v = std::stoull(s, &pos);
  } catch (const std::exception&) {
    throw refuse();
  }
  std::string unit = s.substr(pos);
  for (auto suffix : {"iB", "B"})
    if (unit.size() > 1 && unit.ends_with(suffix)) unit.resize(unit.size() - std::strlen(suffix));
  int shift = -1;
  if (unit == "K" || unit == "k") shift = 10;
  if (unit == "M" || unit == "m") shift = 20;
  if (unit == "G" || unit == "g") shift = 30;
  if (unit == "T" || unit == "t") shift = 40;
  if (unit.empty() || unit == "B") shift = 0;
  constexpr unsigned long long kMost = 1ull << 40;  // no machine has more to move; 2 sizes of it fit in size_t
  if (shift < 0 || v > (kMost >> shift)) throw refuse();
  return static_cast<size_t>(v << shift);
}

DType parse_dtype(const std::string& s) {
  for (DType d : {DType::f32, DType::f64, DType::i32, DType::i64, DType::bf16})
    if (s == dtype_name(d)) return d;
  throw Error("unknown dtype '" + s + "'", "use float32, float64, int32, int64 or bfloat16");
}

struct BenchCommArgs {
  comm::BenchOptions bench;
  std::string backend = "shm";
  int ranks = 0;
  bool json = false;
  bool within_host = false;
  int timeout_s = 120;
};

// "4 ranks on 2 hosts (2,2 ranks)" (or "2 ranks within each host of ..."),
// and the links' rate when scripts/cluster.sh set them.
std::string placement(const comm::HostMap& hosts, int n, bool within_host) {
  std::string s = std::to_string(n) + " ranks";
  if (hosts.ranks.size() > 1) {
    s += within_host ? " within each host of " : " on ";
    s += hosts.describe();
  }
  if (const char* rate = std::getenv("ARTEL_CLUSTER_RATE")) s += std::string(", links ") + rate + " per host (scripts/cluster.sh)";
  return s;
}

// The bytes sent per op, or `unknown` where MPI's own collective ran.
std::string sent(const comm::BenchRow& r, const char* unknown) {
  if (!r.sent) return unknown;
  char s[32];
  std::snprintf(s, sizeof s, "%.0f", *r.sent);
  return s;
}

// The header's algorithm: what was asked and, when that differs, what ran, in
// order of size ("auto -> one_shot, two_shot"); the column `ran` says which size
// ran which.
std::string chosen(const std::vector<comm::BenchRow>& rows, const std::string& requested) {
  std::string ran;
  std::string last;
  for (const auto& r : rows) {
    if (r.algorithm == last || r.algorithm == "-") continue;
    if (!ran.empty()) ran += ", ";
    ran += last = r.algorithm;
  }
  return ran.empty() || ran == requested ? requested : requested + " -> " + ran;
}

void print(const std::vector<comm::BenchRow>& rows, const BenchCommArgs& a, int n, const comm::HostMap& hosts) {
  if (a.json) {
    for (const auto& r : rows)
      std::printf("{\"op\":\"%s\",\"backend\":\"%s\",\"ranks\":%d,\"algorithm\":\"%s\",\"size\":%zu,\"count\":%zu,\"type\":\"%s\","
                  "\"redop\":\"%s\",\"root\":%d,\"time_us\":%.3f,\"algbw\":%.4f,\"busbw\":%.4f,\"wrong\":%lld,\"registered\":%s,"
                  "\"sent_bytes\":%s,\"ran\":\"%s\"}\n",
                  a.bench.op.c_str(), a.backend.c_str(), n, a.bench.algorithm.c_str(), r.bytes, r.count, r.type.c_str(),
                  r.redop.c_str(), r.root, r.time_us, r.algbw, r.busbw, static_cast<long long>(r.wrong), r.registered ? "true" : "false",
                  sent(r, "null").c_str(), r.algorithm.c_str());
    std::fflush(stdout);
    return;
  }
  std::printf("# artel bench comm: %s, backend %s, %s, algorithm %s\n#\n", a.bench.op.c_str(), a.backend.c_str(),
              placement(hosts, n, a.within_host).c_str(), chosen(rows, a.bench.algorithm).c_str());
  std::printf("#%12s %13s %9s %7s %6s %11s %8s %8s %7s %4s %12s  %s\n", "size", "count", "type", "redop", "root", "time", "algbw",
              "busbw", "#wrong", "reg", "sent/rank", "ran");
  std::printf("#%12s %13s %9s %7s %6s %11s %8s %8s %7s %4s %12s\n", "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "",
              "", "(B)");
  for (const auto& r : rows)
    std::printf(" %12zu %13zu %9s %7s %6d %11.2f %8.2f %8.2f %7lld %4s %12s  %s\n", r.bytes, r.count, r.type.c_str(),
                r.redop.c_str(), r.root, r.time_us, r.algbw, r.busbw, static_cast<long long>(r.wrong), r.registered ? "yes" : "no",
                sent(r, "-").c_str(), r.algorithm.c_str());
  std::fflush(stdout);
}

// One rank: join the group, run, rank 0 prints. Returns the exit code.
// --within-host: every host's ranks as a subgroup, all hosts at once.
int run_rank(const comm::GroupOptions& g, const BenchCommArgs& a) {
  auto pg = comm::init_process_group(g);
  try {
    const comm::HostMap hosts = comm::host_map(*pg);
    std::shared_ptr<comm::ProcessGroup> group = pg;
    if (a.within_host) group = pg->new_group(hosts.ranks[static_cast<size_t>(hosts.host_of[static_cast<size_t>(pg->rank())])]);
    auto rows = comm::bench_collective(*group, a.bench);
    if (pg->rank() == 0) print(rows, a, group->size(), hosts);
    for (const auto& r : rows)
      if (r.wrong) return 3;
    return 0;
  } catch (...) {
    pg->end_job_on_failure();  // mpi: the peers would wait for this rank to their timeout
    throw;
  }
}

comm::GroupOptions group_options(const BenchCommArgs& a) {
  comm::GroupOptions g;
  g.backend = a.backend;
  g.timeout = std::chrono::seconds(a.timeout_s);
  g.registered_bytes = 2 * a.bench.max_bytes + (1 << 20);  // in and out of the largest size
  return g;
}

// Forks the workers of a one-machine job; returns the worst exit code.
int fork_workers(const BenchCommArgs& a) {
  comm::GroupOptions g = group_options(a);
  g.world_size = a.ranks;
  g.job_id = "bench-" + std::to_string(getpid());
  std::vector<pid_t> pids;
  for (int r = 0; r < a.ranks; ++r) {
    pid_t pid = fork();
    if (pid < 0) throw Error("fork failed");
    if (pid == 0) {
      int code = 1;
      try {
        g.rank = r;
        code = run_rank(g, a);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "artel bench comm: rank %d: error: %s\n", r, e.what());
      }
      std::fflush(stdout);
      _exit(code);
    }
    pids.push_back(pid);
  }
  int worst = 0;
  for (size_t left = pids.size(); left > 0; --left) {
    int status = 0;
    pid_t done = wait(&status);
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
    if (code != 0 && worst == 0)  // one failed: stop the others rather than let them time out
      for (pid_t p : pids)
        if (p != done) kill(p, SIGTERM);
    worst = std::max(worst, code);
  }
  return worst;
}

int run_bench_comm(int argc, char** argv) {
  BenchCommArgs a;
  std::string min_bytes = "8", max_bytes = "256M", dtype = "float32", redop = "sum";
  bool unregistered = false;
  if (const char* backend = std::getenv("ARTEL_BACKEND")) a.backend = backend;  // --backend overrides it
  CLI::App app{"Benchmark a collective like nccl-tests: size, count, type, redop, root, time, algbw, busbw, #wrong", "artel bench comm"};
  app.add_option("--op", a.bench.op, "all_reduce|broadcast|reduce|all_gather|reduce_scatter|all_to_all|sendrecv")->capture_default_str();
  app.add_option("--backend", a.backend, "shm (forks -n workers unless launched as one) or mpi (under mpirun); default $ARTEL_BACKEND or shm")->capture_default_str();
  app.add_option("-n,--nproc", a.ranks, "ranks to fork (shm, when not launched by `artel launch`)")
      ->check(CLI::Range(1, 4096));  // `artel train --nproc`'s range
  app.add_option("--min-bytes", min_bytes, "smallest size (e.g. 8, 4K)")->capture_default_str();
  app.add_option("--max-bytes", max_bytes, "largest size (e.g. 256M)")->capture_default_str();
  app.add_option("--iters", a.bench.iters, "timed iterations per size (0: by size)")->check(non_negative());
  app.add_option("--warmup", a.bench.warmup, "warm-up iterations per size (0: iters/10)")->check(non_negative());
  app.add_option("--algo,--algorithm", a.bench.algorithm, "algorithm (docs/COLLECTIVES.md)")->capture_default_str();
  app.add_option("--dtype", dtype, "float32|float64|int32|int64|bfloat16")->capture_default_str();
  app.add_option("--redop", redop, "sum|avg|max|min|prod")->capture_default_str();
  app.add_flag("--unregistered", unregistered, "use plain memory instead of ProcessGroup::alloc");
  app.add_option("--timeout", a.timeout_s, "seconds before a stuck collective is an error")->check(positive());
  app.add_flag("--json", a.json, "one JSON object per row");
  app.add_flag("--within-host", a.within_host,
               "each host's ranks as a group of their own, every host at once (what a tensor-parallel group inside a "
               "host gets; over mpi across hosts, artel's shared memory)");
  if (!parse_flags(app, argc, argv, "see `artel bench comm --help`")) return 0;
  a.bench.min_bytes = parse_bytes(min_bytes);
  a.bench.max_bytes = parse_bytes(max_bytes);
  a.bench.dtype = parse_dtype(dtype);
  a.bench.redop = comm::parse_reduce_op(redop);
  a.bench.registered = !unregistered;
  const bool forks = !comm::launched_as_worker() && a.backend != "mpi";  // else the ranks are known once started
  comm::check_bench_options(a.bench, forks ? a.ranks : 0);
  if (comm::launched_as_worker()) return run_rank(comm::group_options_from_env(group_options(a)), a);
  if (a.backend == "mpi") {  // under mpirun: the mpi backend takes rank and size from MPI itself
    comm::GroupOptions g = group_options(a);
    g.job_id = "mpi";
    return run_rank(g, a);
  }
  if (a.ranks < 1) throw Error("-n must be >= 1 to fork the workers of a " + a.backend + " job", "e.g. artel bench comm -n 2");
  return fork_workers(a);
}

const bool kBenchCommRegistered = register_bench("comm", "collectives over a backend, nccl-tests columns", run_bench_comm);

}  // namespace
}  // namespace artel::cli
