// The parameter server over ranks as threads: workers pull, push a known
// gradient and check what their reads hold. Every push is SGD on gradient
// −W at learning rate 1 (a BSP step: the average −W; an SSP/ASP push: lr/W),
// so every element of a read counts the pushes applied to it.
#include "artel/parallel/ps_server.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <sstream>

#include "artel/comm/thread_group.h"
#include "artel/optim/sgd.h"
#include "artel/parallel/ps_client.h"
#include "artel/parallel/ps_selection.h"

namespace artel::parallel {
namespace {

constexpr int kWorkers = 4, kServers = 2;
const std::vector<PsParameter> kParams = {{"big", {1000, 1001}}, {"w", {30, 7}}, {"b", {7}}};

struct Shared {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<int64_t> clocks = std::vector<int64_t>(kWorkers, 0);  // pushes done
  std::atomic<int> violations{0};
  std::string first_violation;
  void fail(const std::string& why) {
    std::lock_guard lock(mu);
    if (violations++ == 0) first_violation = why;
  }
};

PsServerOptions server_options(std::optional<int64_t> staleness, std::ostream* log) {
  return {.staleness = staleness,
          .make_optimizer = [](const nn::NamedParameters& p) {
            return std::make_unique<optim::Sgd>(optim::one_group(p, 1.0f), optim::SgdOptions{});
          },
          .log = log};
}

// Runs W workers of `steps` steps and S servers. Worker `stalled` (if any)
// waits before its step `stall_at` until `release(shared)` holds.
void run_job(std::optional<int64_t> staleness, int64_t steps, int stalled, int64_t stall_at,
             const std::function<bool(const Shared&)>& release, Shared& shared, std::ostream& log) {
  comm::GroupOptions opts;
  opts.timeout = std::chrono::seconds(120);
  comm::spawn_threads(kWorkers + kServers, [&](comm::ProcessGroup& world) {
    const PsRoles roles = PsRoles::of(world.size(), kServers);
    if (roles.is_server(world.rank())) {
      ParameterServer server(world, roles, server_options(staleness, &log));
      server.serve();
      return;
    }
    const int w = world.rank();
    PsClient client(world, roles, staleness, std::chrono::seconds(360));
    std::vector<Tensor> values, grads;
    for (const PsParameter& p : kParams) {
      values.push_back(Tensor::zeros(p.shape));
      grads.push_back(Tensor::full(p.shape, -static_cast<float>(kWorkers)));
    }
    client.start(kParams, values, w == 0);
    if (w == 0) client.start_clock(0);
    for (int64_t c = 0; c < steps; ++c) {
      if (w == stalled && c == stall_at) {
        std::unique_lock lock(shared.mu);
        if (!shared.cv.wait_for(lock, std::chrono::seconds(60), [&] { return release(shared); }))
          shared.first_violation += "the stalled worker was never released; ";
      }
      const int64_t required = client.required_view(c);
      const int64_t view = client.pull(c, required);
      {
        std::lock_guard lock(shared.mu);
        const int64_t slowest = *std::min_element(shared.clocks.begin(), shared.clocks.end());
        if (staleness && c - slowest > *staleness)
          shared.first_violation += "worker " + std::to_string(w) + " read at clock " + std::to_string(c) +
                                    " while the slowest had pushed " + std::to_string(slowest) + "; ";
      }
      if (view < required) shared.fail("a view below the required one");
      // Every element holds the pushes applied to it: at least every
      // worker's pushes of the clocks below c - s.
      for (size_t i = 0; i < values.size(); ++i) {
        const float* v = values[i].data<float>();
        for (int64_t e = 0; e < values[i].numel(); e += 997)
          if (v[e] < static_cast<float>(kWorkers * required))
            shared.fail("worker " + std::to_string(w) + " at clock " + std::to_string(c) + " read " +
                        std::to_string(v[e]) + " pushes in " + kParams[i].name + ", fewer than " +
                        std::to_string(kWorkers * required));
      }
      {
        // Counted before the push, so it is never behind what the servers have seen.
        std::lock_guard lock(shared.mu);
        ++shared.clocks[static_cast<size_t>(w)];
      }
      shared.cv.notify_all();
      client.push(c, 1.0, c - view, grads);
    }
    client.pull(steps, steps);  // every update of the run
    for (size_t i = 0; i < values.size(); ++i)
      if (values[i].data<float>()[0] != static_cast<float>(kWorkers * steps)) shared.fail("a final read is incomplete");
    if (w == 0) {
      std::vector<PsWorkerStats> stats = client.stats();
      for (const PsWorkerStats& s : stats)
        if (s.pushes != steps || s.staleness.reads() != steps) shared.fail("statistics miss pushes");
    }
    client.done(steps);
  }, opts);
}

TEST(ParameterServer, BspAppliesEveryClockWhole) {
  Shared shared;
  std::ostringstream log;
  run_job(0, 6, -1, 0, nullptr, shared, log);
  EXPECT_EQ(shared.violations.load(), 0) << shared.first_violation;
  EXPECT_EQ(shared.first_violation, "");
}

// The must-show: a stalled worker; nobody runs more than s clocks ahead of
// it, and every read holds every update up to c − s − 1.
TEST(ParameterServer, SspBoundHoldsAgainstAStalledWorker) {
  const int64_t s = 2, stall_at = 3;
  Shared shared;
  std::ostringstream log;
  // Released once the others have gone as far as the bound lets them:
  // pushed clock stall_at + s, so they wait in the read of the next.
  auto release = [&](const Shared& sh) {
    for (int w = 0; w + 1 < kWorkers; ++w)
      if (sh.clocks[static_cast<size_t>(w)] < stall_at + s + 1) return false;
    return true;
  };
  run_job(s, 10, kWorkers - 1, stall_at, release, shared, log);
  EXPECT_EQ(shared.violations.load(), 0) << shared.first_violation;
  EXPECT_EQ(shared.first_violation, "");
}

TEST(ParameterServer, AspNeverWaitsForAStalledWorker) {
  const int64_t steps = 8;
  Shared shared;
  std::ostringstream log;
  auto others_done = [&](const Shared& sh) {  // only reachable if nobody waits for the stalled worker
    for (int w = 0; w + 1 < kWorkers; ++w)
      if (sh.clocks[static_cast<size_t>(w)] < steps) return false;
    return true;
  };
  // The final read waits for every update, so worker 0's wait covers the stalled one's steps.
  run_job(std::nullopt, steps, kWorkers - 1, 1, others_done, shared, log);
  EXPECT_EQ(shared.violations.load(), 0) << shared.first_violation;
  EXPECT_EQ(shared.first_violation, "");
}

TEST(ParameterServer, SspDropsAWorkerThatLeavesAndTheOthersFinish) {
  comm::GroupOptions opts;
  opts.timeout = std::chrono::seconds(120);
  std::ostringstream log;
  std::vector<PsWorkerStats> stats;
  comm::spawn_threads(3 + 1, [&](comm::ProcessGroup& world) {
    const PsRoles roles = PsRoles::of(world.size(), 1);
    if (roles.is_server(world.rank())) {
      ParameterServer server(world, roles, server_options(1, &log));
      server.serve();
      return;
    }
    std::vector<Tensor> values = {Tensor::zeros({5})}, grads = {Tensor::full({5}, -3.0f)};
    PsClient client(world, roles, 1, std::chrono::seconds(360));
    client.start({{"x", {5}}}, values, world.rank() == 0);
    if (world.rank() == 0) client.start_clock(0);
    const int64_t steps = world.rank() == 2 ? 2 : 10;  // worker 2 leaves without a word after 2 steps
    for (int64_t c = 0; c < steps; ++c) {
      const int64_t view = client.pull(c, client.required_view(c));
      client.push(c, 1.0, c - view, grads);
    }
    if (world.rank() == 2) return;
    client.pull(steps, steps);
    if (world.rank() == 0) stats = client.stats();
    client.done(steps);
  }, opts);
  ASSERT_EQ(stats.size(), 3u);
  EXPECT_TRUE(stats[2].dropped);
  EXPECT_EQ(stats[2].dropped_at, 2);
  EXPECT_EQ(stats[0].pushes, 10);
  EXPECT_NE(log.str().find("dropped worker 2 (rank 2) at clock 2"), std::string::npos) << log.str();
}

// A sparse table of 250,000 rows of 4 (split over both servers between rows)
// and a dense parameter, under BSP with SGD at rate 1: each worker reads and
// pushes only its own rows, so after the run a row holds the pushes of the
// workers that touched it (each −W, averaged over W: +1 a step), an untouched
// row nothing, and the dense parameter W a step. The bytes are those rows'.
TEST(ParameterServer, SparseTablesMoveOnlyTheRowsAStepReads) {
  constexpr int64_t kRows = 250'000, kDim = 4, kSteps = 3;
  const std::vector<PsParameter> params = {{"table", {kRows, kDim}, true}, {"dense", {6}}};
  comm::GroupOptions opts;
  opts.timeout = std::chrono::seconds(120);
  std::vector<std::string> failures(kWorkers);
  std::vector<int64_t> sent(kWorkers);
  comm::spawn_threads(kWorkers + kServers, [&](comm::ProcessGroup& world) {
    const PsRoles roles = PsRoles::of(world.size(), kServers);
    std::ostringstream log;
    if (roles.is_server(world.rank())) {
      ParameterServer server(world, roles, server_options(0, &log));
      server.serve();
      return;
    }
    const int w = world.rank();
    auto& fail = failures[static_cast<size_t>(w)];
    std::vector<Tensor> values = {Tensor::zeros({kRows, kDim}), Tensor::zeros({6})};
    std::vector<Tensor> grads = {Tensor::full({kRows, kDim}, -static_cast<float>(kWorkers)),
                                 Tensor::full({6}, -static_cast<float>(kWorkers))};
    PsClient client(world, roles, 0, std::chrono::seconds(360));
    client.start(params, values, w == 0);
    if (w == 0) client.start_clock(0);
    // Worker w's rows: its own, one each side of the servers' cut, and row 7 (every worker's).
    const std::vector<int64_t> rows = {7, 10 + w, kRows / 2 - 1 - w, kRows / 2 + w};
    std::vector<int64_t> mine = rows;
    std::sort(mine.begin(), mine.end());
    for (int64_t c = 0; c < kSteps; ++c) {
      client.pull(c, c, {.dense = true, .sparse = PsSparse::none});
      if (values[1].data<float>()[0] != static_cast<float>(kWorkers * c)) fail += "dense read wrong; ";
      const int64_t before = client.bytes_sent() + client.bytes_received();
      client.pull_rows(c, c, 0, mine);
      const int64_t moved = client.bytes_sent() + client.bytes_received() - before;
      // Rows down (4 floats each) and their ids up, plus headers: nowhere near the table.
      if (moved > 4 * (kDim * 4 + 8) + 2 * 2 * 48 + 64) fail += "a row read moved " + std::to_string(moved) + " bytes; ";
      for (int64_t r : mine)
        if (values[0].data<float>()[r * kDim] != static_cast<float>(r == 7 ? kWorkers * c : c))
          fail += "row " + std::to_string(r) + " read " + std::to_string(values[0].data<float>()[r * kDim]) + "; ";
      const int64_t sent_before = client.bytes_sent();
      client.push(c, 1.0, 0, grads);
      sent[static_cast<size_t>(w)] = client.bytes_sent() - sent_before;
    }
    client.pull(kSteps, kSteps);  // whole
    const float* t = values[0].data<float>();
    for (int64_t r : mine)
      if (t[r * kDim + kDim - 1] != static_cast<float>(r == 7 ? kWorkers * kSteps : kSteps)) fail += "final row wrong; ";
    if (t[12345 * kDim] != 0.0f || t[(kRows - 1) * kDim] != 0.0f) fail += "an untouched row moved; ";
    if (values[1].data<float>()[5] != static_cast<float>(kWorkers * kSteps)) fail += "final dense wrong; ";
    client.done(kSteps);
  }, opts);
  for (int w = 0; w < kWorkers; ++w) {
    EXPECT_EQ(failures[static_cast<size_t>(w)], "") << "worker " << w;
    // A push: the dense 6 floats, 4 rows of 4 floats and their ids and counts, headers.
    EXPECT_LT(sent[static_cast<size_t>(w)], 6 * 4 + 4 * kDim * 4 + 8 * 8 + 2 * 48 + 64) << "worker " << w;
  }
}

TEST(ParameterServer, RowListsAreCheckedAndTablesCutBetweenRows) {
  PsLayout layout({{"t", {7, 3}, true}, {"d", {5}}}, 2);
  // plan_ps_shards cuts only at 1e6 elements; a small table is whole on one server.
  EXPECT_EQ(layout.plan[0].parts.size(), 1u);
  auto cut = plan_ps_shards({{"t", 21}}, 2, /*split_threshold=*/1, /*units=*/{3});
  EXPECT_EQ(cut[0].parts[0].end % 3, 0);
  EXPECT_EQ(cut[0].parts[1].begin, cut[0].parts[0].end);
  EXPECT_THROW(plan_ps_shards({{"t", 20}}, 2, 1, {3}), Error);
  const int s = layout.plan[0].parts[0].server;
  EXPECT_EQ(decode_ps_rows({2, 1, 5}, layout, s), (PsRowList{{1, 5}}));
  EXPECT_THROW(decode_ps_rows({2, 5, 1}, layout, s), Error);  // not ascending
  EXPECT_THROW(decode_ps_rows({1, 7}, layout, s), Error);     // past the last row
  EXPECT_THROW(decode_ps_rows({3, 1}, layout, s), Error);     // truncated
  EXPECT_EQ(PsSelection::decode(PsSelection{.dense = false, .sparse = PsSparse::rows}.encode()).sparse, PsSparse::rows);
  EXPECT_TRUE(parse_ps_table(ps_table_text(layout.params))[0].sparse);
  EXPECT_FALSE(parse_ps_table(ps_table_text(layout.params))[1].sparse);
}

TEST(ParameterServer, LayoutSplitsLargeTensorsAndPlacesSmallOnesWhole) {
  PsLayout layout(kParams, kServers);
  EXPECT_EQ(layout.plan[0].parts.size(), 2u);  // 1,001,000 elements: over both servers
  EXPECT_EQ(layout.elements[0] + layout.elements[1], 1001000 + 210 + 7);
  EXPECT_EQ(parse_ps_table(ps_table_text(kParams))[1].shape, (Shape{30, 7}));
}

TEST(ParameterServer, StalenessParses) {
  EXPECT_EQ(parse_staleness("0"), 0);
  EXPECT_EQ(parse_staleness("3"), 3);
  EXPECT_EQ(parse_staleness("inf"), std::nullopt);
  EXPECT_THROW(parse_staleness("-1"), Error);
  EXPECT_THROW(parse_staleness("2x"), Error);
  EXPECT_THROW(PsRoles::of(2, 2), Error);
}

}  // namespace
}  // namespace artel::parallel
