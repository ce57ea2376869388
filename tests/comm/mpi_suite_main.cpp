// The collective suite (collective_suite.h) on the "mpi" backend, as a program
// run under mpirun (tests.cmake: mpi_suite_np2, mpi_suite_np4): every op,
// dtype and reduce op, MPI's own collectives ("auto") and artel's point-to-point
// algorithms over MPI, then what only a real MPI job shows — subgroups used at
// once, ops in flight together, size mismatches and timeouts as errors.
// Exits non-zero on the first failure (after MPI_Abort, so no rank is left
// waiting) and rank 0 prints a closing line.
//
//   mpirun --allow-run-as-root --oversubscribe -np 4 build/tests/artel_mpi_suite
#define OMPI_SKIP_MPICXX 1  // MPI's C API only
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>

#include "artel/comm/algorithms.h"
#include "artel/comm/hosts.h"
#include "artel/comm/process_group.h"
#include "collective_suite.h"

namespace artel::comm {
namespace {

using testing::check_equal;

GroupOptions mpi_options(Duration timeout = std::chrono::seconds(120)) {
  GroupOptions o;
  o.backend = "mpi";
  o.timeout = timeout;
  return o;
}

// Runs `fn`, which must throw an Error whose message contains `needle`.
void expect_error(const std::string& what, const std::string& needle, const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    if (std::string(e.what()).find(needle) != std::string::npos) return;
    throw Error(what + ": the error does not mention '" + needle + "': " + e.what());
  }
  throw Error(what + ": no error was thrown");
}

// A subgroup's share of the suite: all-reduce, the gather family and point
// to point, the shared-memory algorithms too where the group has them.
void check_subgroup_suite(ProcessGroup& g, bool shared_memory) {
  testing::SuiteOptions so;
  so.shared_memory = shared_memory;
  so.sizes = {0, 1, 13, 1031};
  so.dtypes = {DType::f32, DType::bf16};
  so.ops = {ReduceOp::sum, ReduceOp::avg};
  testing::check_all_reduce(g, so);
  testing::check_gather_family(g, so);
  if (g.size() >= 2) testing::check_point_to_point(g);
}

// The even and the odd ranks each form a subgroup and run collectives at the
// same time as the world group does.
void check_subgroups(ProcessGroup& world) {
  const int r = world.rank(), n = world.size();
  std::vector<int> evens, odds;
  for (int i = 0; i < n; ++i) (i % 2 ? odds : evens).push_back(i);
  if (n < 2) return;
  auto even = world.new_group(evens), odd = world.new_group(odds);
  auto& mine = r % 2 ? odd : even;
  if (!mine || (r % 2 ? even : odd)) throw Error("new_group: a rank got the wrong subgroups");
  Tensor sub = Tensor::full({1001}, static_cast<float>(r)), all = Tensor::full({77}, 1.f);
  auto w1 = mine->all_reduce(sub);
  auto w2 = world.all_reduce(all);
  w1->wait();
  w2->wait();
  float want = 0;
  for (int i = r % 2; i < n; i += 2) want += static_cast<float>(i);
  for (int64_t i = 0; i < 1001; i += 100) check_equal(sub, i, want, "subgroup all_reduce");
  for (int64_t i = 0; i < 77; ++i) check_equal(all, i, n, "world all_reduce beside a subgroup");
  check_subgroup_suite(*mine, /*shared_memory=*/false);
}

// Note [Subgroups on one host] (mpi_transport.h): the ranks of one host, as a
// subgroup, run on artel's shared memory when the job spans hosts (a
// shared-memory algorithm runs, MPI's own are refused) and on MPI when the
// whole job is on one host (the other way round).
void check_host_subgroups(ProcessGroup& world) {
  const HostMap hosts = host_map(world);
  const std::vector<int>& mine = hosts.ranks[static_cast<size_t>(hosts.host_of[static_cast<size_t>(world.rank())])];
  if (mine.size() < 2) return;  // a host of one rank (3 hosts of 2, 1 and 2)
  auto local = world.new_group(mine);
  const bool spans = hosts.ranks.size() > 1;
  const int m = local->size();
  Tensor x = Tensor::full({1031}, static_cast<float>(local->rank() + 1));
  local->all_reduce(x, {ReduceOp::sum, spans ? "one_shot" : "native"})->wait();
  for (int64_t i = 0; i < 1031; i += 103) check_equal(x, i, m * (m + 1) / 2, "a host's subgroup all_reduce");
  const std::string where = "a host's subgroup on " + hosts.describe();
  if (spans)
    expect_error(where, "not available", [&] { local->all_reduce(x, {ReduceOp::sum, "native"})->wait(); });
  else
    expect_error(where, "needs shared memory", [&] { local->all_reduce(x, {ReduceOp::sum, "one_shot"})->wait(); });
  check_subgroup_suite(*local, /*shared_memory=*/spans);
  if (local->rank() == 0)
    std::printf("a host's subgroup of %d ranks on %s: %s\n", m, hosts.describe().c_str(),
                spans ? "artel's shared memory" : "MPI");
}

// Several ops issued before any wait complete in order, with the right values.
void check_in_flight(ProcessGroup& pg) {
  const int n = pg.size();
  std::vector<Tensor> ts;
  std::vector<WorkPtr> ws;
  for (int k = 0; k < 8; ++k) {
    ts.push_back(Tensor::full({(k + 1) * 1000}, static_cast<float>(k)));
    ws.push_back(pg.all_reduce(ts.back(), {ReduceOp::sum, k % 2 ? "ring" : "auto"}));
  }
  ws.push_back(pg.barrier());
  for (auto& w : ws) w->wait();
  for (int k = 0; k < 8; ++k) check_equal(ts[k], ts[k].numel() - 1, static_cast<double>(k) * n, "all_reduce issued in a batch");
}

// A message of the wrong size is an error naming the peer, and so is a
// collective of the wrong size with debug checks (MPI's own collectives cannot
// tell otherwise), and a receive that never comes is a TimeoutError naming
// the rank; on a fresh group each time (a failed group stays failed).
void check_errors(int rank, int size) {
  if (size < 2) return;
  {
    auto pg = init_process_group(mpi_options());
    if (rank == 0) pg->send(Tensor::zeros({10}), 1, 5)->wait();
    if (rank == 1) expect_error("recv of a smaller message", "has 40 bytes, 44 expected", [&] { pg->recv(Tensor::zeros({11}), 0, 5)->wait(); });
    pg = nullptr;
  }
  {
    auto pg = init_process_group(mpi_options());
    if (rank == 0) pg->send(Tensor::zeros({10}), 1, 5)->wait();
    if (rank == 1) expect_error("recv of a larger message", "larger than the 36 bytes", [&] { pg->recv(Tensor::zeros({9}), 0, 5)->wait(); });
  }
  {
    GroupOptions o = mpi_options();
    o.debug_checks = true;
    auto pg = init_process_group(o);
    Tensor t = Tensor::zeros({rank == 1 ? 7 : 8});
    expect_error("debug checks on a native all_reduce", "rank 1 issued all_reduce #1 of 7", [&] { pg->all_reduce(t)->wait(); });
  }
  {
    auto pg = init_process_group(mpi_options(std::chrono::milliseconds(300)));
    if (rank == 1)
      expect_error("recv that no one sends", "waiting for rank(s) [0]",
                   [&] { pg->recv(Tensor::zeros({3}), 0, 9)->wait(std::chrono::seconds(30)); });
  }
  init_process_group(mpi_options())->barrier()->wait();  // everyone is past the timeout before the next checks
}

// Across hosts, auto's reduce-scatter is artel's ring over MPI, not MPI's
// own, and so is its all-gather of 64 KiB or more (algorithms.cpp:
// auto_is_native): each rank sends (n-1) blocks.
void check_auto_rings_across_hosts(ProcessGroup& pg, const HostMap& hosts) {
  const int64_t count = 8209, n = pg.size();  // 4·count·n ≥ 64 KiB from 2 ranks
  const auto sum = static_cast<float>(n * (n + 1) / 2);
  Tensor x = Tensor::full({count * n}, static_cast<float>(pg.rank() + 1)), one = Tensor::empty({count});
  auto expect_ring = [&](const std::string& op, int64_t before) {
    if (pg.bytes_sent() - before != (n - 1) * count * 4 || std::string(pg.last_algorithm()) != "ring")
      throw Error("auto " + op + " across hosts ran " + pg.last_algorithm() + " and sent " +
                  std::to_string(pg.bytes_sent() - before) + " bytes, not a ring's " + std::to_string((n - 1) * count * 4));
  };
  int64_t before = pg.bytes_sent();
  pg.reduce_scatter(x, one, {ReduceOp::sum, "auto"})->wait();
  for (int64_t i = 0; i < count; i += 97) check_equal(one, i, sum, "auto reduce_scatter across hosts");
  expect_ring("reduce_scatter", before);
  before = pg.bytes_sent();
  pg.all_gather(one, x, {"auto"})->wait();
  for (int64_t i = 0; i < count * n; i += 97) check_equal(x, i, sum, "auto all_gather across hosts");
  expect_ring("all_gather", before);
  if (pg.rank() == 0) std::printf("auto reduce_scatter and all_gather are rings on %s\n", hosts.describe().c_str());
}

// Over hosts of which one has several ranks (scripts/cluster.sh) the
// hierarchical all-reduce runs when named (auto picks it too, and the suite
// above checks its results), and over hosts of equal rank counts its
// reduce-scatter and all-gather; elsewhere naming them is refused, saying why.
void check_hierarchy(ProcessGroup& pg) {
  const HostMap hosts = host_map(pg);
  size_t most = 0;
  for (const auto& on_host : hosts.ranks) most = std::max(most, on_host.size());
  const bool hierarchy = hosts.ranks.size() > 1 && most > 1;
  bool equal = hierarchy;
  for (const auto& on_host : hosts.ranks) equal = equal && on_host.size() == most;
  const int r = pg.rank(), n = pg.size();
  const int64_t count = 1031;
  Tensor x = Tensor::full({count * n}, static_cast<float>(r + 1));
  const float sum = static_cast<float>(n * (n + 1) / 2);
  if (!hierarchy) {
    expect_error("hierarchical all_reduce on " + hosts.describe(), "not spread",
                 [&] { pg.all_reduce(x, {ReduceOp::sum, "hierarchical"})->wait(); });
    if (hosts.ranks.size() > 1) check_auto_rings_across_hosts(pg, hosts);
    return;
  }
  pg.all_reduce(x, {ReduceOp::sum, "hierarchical"})->wait();
  for (int64_t i = 0; i < count * n; i += 97) check_equal(x, i, sum, "hierarchical all_reduce");
  // Three chunks and a part (Note [Pipelined hierarchical all-reduce]), and a
  // tail that the local ranks do not divide: every element differs, so a
  // block or chunk out of place shows, and avg divides each one once.
  const int64_t chunk = static_cast<int64_t>(kHierarchicalChunkBytes / sizeof(float));
  for (const ReduceOp op : {ReduceOp::sum, ReduceOp::avg}) {
    const int64_t len = 3 * chunk + chunk / 2 + 5;  // divided by neither 2 nor 3 local ranks
    Tensor big = Tensor::empty({len});
    for (int64_t i = 0; i < len; ++i) big.data<float>()[i] = static_cast<float>(i % 4099 + r);
    pg.all_reduce(big, {op, "hierarchical"})->wait();
    for (int64_t i = 0; i < len; i += i + 13 < len ? 1 + i % 509 : 1) {
      const auto total = static_cast<float>(n * (i % 4099) + n * (n - 1) / 2);
      check_equal(big, i, op == ReduceOp::avg ? total / static_cast<float>(n) : total, "hierarchical all_reduce in chunks");
    }
  }
  // What crossed: each rank of a slice sends 2(H−1)/H of its block of every
  // chunk, and together the slices send 2(H−1)/H of the buffer from each host.
  {
    const int64_t len = 2 * chunk + 7;
    Tensor ones = Tensor::full({len}, 1.0f), sent = Tensor::zeros({1}, DType::i64), all = Tensor::zeros({n}, DType::i64);
    const int64_t before = pg.bytes_sent();
    pg.all_reduce(ones, {ReduceOp::sum, "hierarchical"})->wait();
    for (int64_t i = 0; i < len; i += 1 + i % 997) check_equal(ones, i, static_cast<float>(n), "hierarchical all_reduce");
    sent.data<int64_t>()[0] = pg.bytes_sent() - before;
    pg.all_gather(sent, all)->wait();
    const auto h = static_cast<int64_t>(hosts.ranks.size());
    const int64_t bound = 2 * (h - 1) * len * 4 / h, slack = 64 * h * static_cast<int64_t>(most);  // blocks' rounding, the tail
    for (size_t host = 0; host < hosts.ranks.size(); ++host) {
      int64_t got = 0;
      for (int rank : hosts.ranks[host]) got += all.data<int64_t>()[rank];
      if (got < bound - slack || got > bound + slack)
        throw Error("hierarchical all_reduce of " + std::to_string(len * 4) + " bytes sent " + std::to_string(got) +
                    " bytes from host " + std::to_string(host) + " of " + hosts.describe() + ", not 2(H-1)/H of it (" +
                    std::to_string(bound) + ")");
    }
  }
  if (!equal) {
    for (const char* op : {"reduce_scatter", "all_gather"})
      expect_error(std::string("hierarchical ") + op + " on " + hosts.describe(), "equal rank counts", [&] {
        Tensor one = Tensor::empty({count});
        if (std::string(op) == "reduce_scatter") pg.reduce_scatter(x, one, {ReduceOp::sum, "hierarchical"})->wait();
        else pg.all_gather(one, x, {"hierarchical"})->wait();
      });
    check_auto_rings_across_hosts(pg, hosts);
    if (r == 0) std::printf("hierarchical all_reduce on %s\n", hosts.describe().c_str());
    return;
  }
  // Blocks of one piece, and of more than one (kHierarchicalScratchBytes):
  // every element differs along the block, so a piece out of place shows.
  const int64_t piece = static_cast<int64_t>(hierarchical_piece(static_cast<size_t>(n), sizeof(float)));
  for (const int64_t len : {int64_t{1031}, piece + 5}) {
    auto value = [](int64_t i, int64_t owner) { return static_cast<double>(i % 1000 + 1000 * owner); };
    Tensor parts = Tensor::empty({len * n}), mine = Tensor::empty({len}), one = Tensor::empty({len});
    for (int64_t i = 0; i < len * n; ++i) parts.data<float>()[i] = static_cast<float>(value(i % len, i / len) + r);
    pg.reduce_scatter(parts, one, {ReduceOp::sum, "hierarchical"})->wait();
    for (int64_t i = 0; i < len; i += i + 13 < len ? 13 : 1)
      check_equal(one, i, n * value(i, r) + n * (n - 1) / 2, "hierarchical reduce_scatter");
    for (int64_t i = 0; i < len; ++i) mine.data<float>()[i] = static_cast<float>(value(i, r));
    Tensor all = Tensor::empty({len * n});
    pg.all_gather(mine, all, {"hierarchical"})->wait();
    for (int64_t b = 0; b < n; ++b)  // every block: a sample, and its last elements (the last piece's)
      for (int64_t i = 0; i < len; i += i + 13 < len ? 31 : 1)
        check_equal(all, b * len + i, value(i, b), "hierarchical all_gather");
  }
  if (r == 0) std::printf("hierarchical all_reduce, reduce_scatter and all_gather on %s\n", hosts.describe().c_str());
}

// On 3 hosts of 2, 1 and 2 ranks, rank `skipper` skips a hierarchical
// all-reduce; rank `watcher`, whose own timeout is the shortest, times out
// first, prints its error and ends the job (tests/comm/hierarchical_timeout.sh
// reads the line).
//   --name-the-missing-rank: rank 4, the third host's second rank, skips;
//     rank 3, its host's first, must name rank 4 (the group's numbering, not
//     the host's 1).
//   --stuck-across-hosts: rank 2, the one-rank host's leader, skips; rank 0
//     gets through its host's step and waits inside MPI in the ring across
//     hosts, which MPI cannot cancel: the watchdog must name the ring's two
//     ranks beside it, one of them rank 2.
int skip_a_hierarchical_all_reduce(int skipper, int watcher) {
  const char* world_rank = std::getenv("OMPI_COMM_WORLD_RANK");  // before MPI starts, which artel does
  const bool watching = world_rank && std::string(world_rank) == std::to_string(watcher);
  auto pg = init_process_group(mpi_options(watching ? std::chrono::seconds(2) : std::chrono::seconds(60)));
  if (pg->size() != 5) throw Error("this probe needs 5 ranks (scripts/cluster.sh --ranks 2,1,2)");
  if (pg->rank() != skipper) {
    Tensor x = Tensor::full({1031}, 1.0f);
    try {
      pg->all_reduce(x, {ReduceOp::sum, "hierarchical"})->wait();
    } catch (const std::exception& e) {
      std::printf("rank %d: %s\n", pg->rank(), e.what());
      std::fflush(stdout);
      MPI_Abort(MPI_COMM_WORLD, 3);
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);  // ended by the watcher's abort
  return 0;
}

// The last rank starts MPI but never calls init_process_group; the others'
// wait for it with a 1 s timeout, print their error and end the job
// (tests/comm/init_timeout.sh reads the line). The communicator duplicate
// they wait in is left pending, never cancelled: MPI_Cancel does not return
// on a collective request.
int one_rank_never_joins() {
  int provided = 0, size = 0, rank = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);  // what init_process_group asks for
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != size - 1) {
    try {
      init_process_group(mpi_options(std::chrono::seconds(1)));
      std::printf("rank %d: init_process_group returned without the last rank\n", rank);
    } catch (const std::exception& e) {
      std::printf("rank %d: %s\n", rank, e.what());
    }
    std::fflush(stdout);
    MPI_Abort(MPI_COMM_WORLD, 3);
  }
  MPI_Barrier(MPI_COMM_WORLD);  // ended by the others' abort
  return 0;
}

int run() {
  auto pg = init_process_group(mpi_options());
  const int r = pg->rank(), n = pg->size();
  int mpi_rank = -1, mpi_size = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &mpi_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &mpi_size);
  if (r != mpi_rank || n != mpi_size) throw Error("rank/size differ from MPI_COMM_WORLD's");
  // OpenMPI's tcp transport gets two connections a peer unless the job says
  // otherwise (mpi_env.cpp); CTest's mpirun says nothing.
  const char* links = std::getenv("OMPI_MCA_btl_tcp_links");
  if (!links || std::strcmp(links, "2") != 0)
    throw Error(std::string("OMPI_MCA_btl_tcp_links is ") + (links ? links : "unset") + " after MPI_Init, not 2");
  testing::SuiteOptions so;
  so.shared_memory = false;
  testing::run_collective_suite(*pg, so);
  check_subgroups(*pg);
  check_host_subgroups(*pg);
  check_in_flight(*pg);
  check_hierarchy(*pg);
  check_errors(r, n);
  pg->barrier()->wait();
  if (r == 0) std::printf("mpi collective suite: passed on %d ranks\n", n);
  return 0;
}

}  // namespace
}  // namespace artel::comm

int main(int argc, char** argv) {
  try {
    const std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "--name-the-missing-rank") return artel::comm::skip_a_hierarchical_all_reduce(4, 3);
    if (mode == "--stuck-across-hosts") return artel::comm::skip_a_hierarchical_all_reduce(2, 0);
    if (mode == "--one-rank-never-joins") return artel::comm::one_rank_never_joins();
    return artel::comm::run();
  } catch (const std::exception& e) {
    int rank = -1, initialized = 0;
    MPI_Initialized(&initialized);
    if (initialized) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    std::fprintf(stderr, "mpi collective suite: FAILED on rank %d: %s\n", rank, e.what());
    std::fflush(stderr);
    if (initialized) MPI_Abort(MPI_COMM_WORLD, 1);  // no rank is left waiting for this one
    return 1;
  }
}
