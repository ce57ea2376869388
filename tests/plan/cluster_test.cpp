// The cluster file's CPU parts: workers sharing a host's cores, the GEMM
// table preferred over peak × efficiency, and the measured numbers and their
// sources surviving a write and a read.
#include "artel/plan/cluster.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>

#include "artel/core/error.h"
#include "artel/plan/memory_model.h"
#include "artel/plan/stage_work.h"
#include "artel/plan/step_model.h"
#include "artel/plan/transformer_shape.h"
#include "test_cluster.h"

namespace artel::plan {
namespace {

// One host of `per_host` workers sharing `cores` cores.
Cluster cpu_host(int per_host, int cores) {
  Cluster c = testing::test_cluster(64e9, 1, per_host);
  c.cores_per_host = {static_cast<double>(cores), "test"};
  return c;
}

// A cluster past 2^20 workers is a typing slip: refused, not overflowed
// (1e30 hosts read as 0 workers) or searched for minutes.
TEST(Cluster, ASizeBeyondAnyClusterIsRefused) {
  Cluster c = testing::test_cluster(64e9, 1, 8);
  c.hosts.value = 1e30;
  try {
    c.validate();
    ADD_FAILURE() << "1e30 hosts accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("exceeds 1048576 workers"), std::string::npos) << e.what();
  }
  c.hosts.value = 131072;  // x 8 = 2^20: the largest accepted
  c.validate();
}

// A misspelt key would leave a number at its default: refused, naming it.
TEST(Cluster, AnUnknownKeyIsRefused) {
  nlohmann::json j = nlohmann::json::parse(to_json(testing::test_cluster(64e9, 1, 8)).dump());
  j["worker_per_host"] = 8;
  try {
    parse_cluster(j, "c.json");
    ADD_FAILURE() << "an unknown key accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("c.json: unknown key \"worker_per_host\""), std::string::npos) << e.what();
  }
  j.erase("worker_per_host");
  j["device"]["peak_flop"] = 1;
  try {
    parse_cluster(j, "c.json");
    ADD_FAILURE() << "an unknown device key accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("c.json: device: unknown key \"peak_flop\""), std::string::npos) << e.what();
  }
}

// A value of the wrong type is named with its place, where nlohmann said
// only "[json.exception.type_error.302] type must be string, but is number";
// a fractional matrix size is refused, not truncated.
TEST(Cluster, AValueOfTheWrongTypeIsRefusedByName) {
  const nlohmann::json good = nlohmann::json::parse(to_json(testing::test_cluster(64e9, 1, 8)).dump());
  auto error = [&](const std::function<void(nlohmann::json&)>& spoil) {
    nlohmann::json j = good;
    spoil(j);
    try {
      parse_cluster(j, "c.json");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(error([](nlohmann::json& j) { j["name"] = 5; }), "c.json: \"name\" must be a string, got number 5");
  // A number out of range is said of the file too (was "cluster: hosts ...", whichever file).
  EXPECT_EQ(error([](nlohmann::json& j) { j["hosts"] = 0; }), "c.json: hosts must be positive, got 0");
  EXPECT_EQ(error([](nlohmann::json& j) { j["device"]["memory_bytes"] = {{"value", 1e9}, {"source", 3}}; }),
            "c.json: device: memory_bytes: \"source\" must be a string, got number 3");
  EXPECT_EQ(error([](nlohmann::json& j) {
              j["device"]["gemm_table"] = {{{"m", 1.5}, {"n", 8}, {"k", 8}, {"flops_per_s", 1e9}}};
            }),
            "c.json: device: gemm_table[0]: \"m\" must be a whole number, got 1.5");
}

TEST(Cluster, WorkersShareTheHostsCores) {
  EXPECT_EQ(worker_speed(testing::test_cluster(), 0), 1);  // a GPU cluster: a worker is its device
  EXPECT_EQ(worker_speed(cpu_host(1, 2), 0), 2);            // one worker takes every core
  EXPECT_EQ(worker_speed(cpu_host(1, 2), 1), 1);            // unless told to run one thread
  EXPECT_EQ(worker_speed(cpu_host(2, 2), 0), 1);
  EXPECT_EQ(worker_speed(cpu_host(4, 2), 0), 0.5);          // oversubscribed: half a core each
  EXPECT_EQ(worker_speed(cpu_host(4, 2), 3), 0.5);
}

TEST(Cluster, AWorkersShareScalesEveryRate) {
  Cluster c = cpu_host(4, 2);
  c.device.gemm_table.push_back({Precision::fp32, 64, 128, 128, 1e11, "test"});
  const Cluster half = with_worker_speed(c, 0.5);
  EXPECT_DOUBLE_EQ(gemm_seconds(half.device, Precision::fp32, 64, 128, 128),
                   2 * gemm_seconds(c.device, Precision::fp32, 64, 128, 128));
  EXPECT_DOUBLE_EQ(half.device.memory_bandwidth.value, c.device.memory_bandwidth.value / 2);
  EXPECT_DOUBLE_EQ(half.device.peak_bf16.value, c.device.peak_bf16.value / 2);
}

TEST(Cluster, TheNearestMeasuredShapeWinsOverPeakTimesEfficiency) {
  Device d = testing::test_cluster().device;
  d.gemm_table = {{Precision::fp32, 64, 128, 128, 1e10, ""}, {Precision::fp32, 4096, 4096, 4096, 5e11, ""}};
  EXPECT_DOUBLE_EQ(gemm_seconds(d, Precision::fp32, 64, 128, 128), 2.0 * 64 * 128 * 128 / 1e10);
  EXPECT_DOUBLE_EQ(gemm_seconds(d, Precision::fp32, 3000, 4096, 4096), 2.0 * 3000 * 4096 * 4096 / 5e11);
  // No bf16 entry: the roofline of peak × efficiency.
  EXPECT_DOUBLE_EQ(gemm_seconds(d, Precision::bf16, 4096, 4096, 4096), 2.0 * 4096 * 4096 * 4096 / 2e12);
}

TEST(Cluster, MeasuredNumbersAndTheirSourcesSurviveWriteAndRead) {
  Cluster c = cpu_host(2, 2);
  c.device.gemm_table.push_back({Precision::bf16, 768, 384, 128, 9e11, "measured: here"});
  c.device.runtime_bytes = {3e7, "measured: VmHWM"};
  const Cluster back = parse_cluster(to_json(c), "round trip");
  EXPECT_EQ(back.cores_per_host.value, 2);
  EXPECT_EQ(back.device.runtime_bytes.source, "measured: VmHWM");
  ASSERT_EQ(back.device.gemm_table.size(), 1u);
  EXPECT_EQ(back.device.gemm_table[0].source, "measured: here");
  EXPECT_EQ(back.device.gemm_table[0].precision, Precision::bf16);
}

// Attention is measured at each precision (its products run in bf16 under
// bf16); a table of fp32 only, as older files hold, serves both.
TEST(Cluster, AttentionIsTimedFromTheEntryOfItsPrecision) {
  Device d = testing::test_cluster().device;
  d.attention_table = {{64, 32, 1e-5, 2e-5, "", Precision::fp32}, {64, 32, 6e-6, 1e-5, "", Precision::bf16}};
  EXPECT_DOUBLE_EQ(attention_seconds(d, Precision::fp32, 10, 64, 32)->forward, 1e-4);
  EXPECT_DOUBLE_EQ(attention_seconds(d, Precision::bf16, 10, 64, 32)->backward, 1e-4);
  // Twice the sequence: four times the pairs of tokens.
  EXPECT_DOUBLE_EQ(attention_seconds(d, Precision::bf16, 1, 128, 32)->forward, 2.4e-5);
  d.attention_table.pop_back();
  EXPECT_DOUBLE_EQ(attention_seconds(d, Precision::bf16, 10, 64, 32)->forward, 1e-4);
  d.attention_table.clear();
  EXPECT_FALSE(attention_seconds(d, Precision::fp32, 10, 64, 32));
  Cluster c = cpu_host(1, 1);
  c.device.attention_table = {{256, 64, 1e-3, 2e-3, "measured: here", Precision::bf16}};
  const Cluster back = parse_cluster(to_json(c), "round trip");
  ASSERT_EQ(back.device.attention_table.size(), 1u);
  EXPECT_EQ(back.device.attention_table[0].precision, Precision::bf16);
  EXPECT_EQ(back.device.attention_table[0].source, "measured: here");
}

TEST(Cluster, OversubscribedWorkersStepSlowerAndTheRuntimeCountsInMemory) {
  const ModelDescription gpt = transformer_model("gpt", {4, 4, 128, 64, 65});
  const Workload w{.global_batch = 24, .precision = Precision::fp32};
  Cluster shared = cpu_host(4, 2);
  shared.device.runtime_bytes = {3e7, "test"};
  const Prediction on_shared = predict(gpt, shared, Layout{.dp = 4}, w);
  const Prediction on_own = predict(gpt, cpu_host(4, 4), Layout{.dp = 4}, w);
  // Half a core each instead of one: every kernel takes twice as long.
  EXPECT_NEAR(on_shared.time.compute, 2 * on_own.time.compute, 1e-12);
  EXPECT_NEAR(on_shared.time.optimizer, 2 * on_own.time.optimizer, 1e-12);
  EXPECT_EQ(on_shared.memory.runtime, 3e7);
  EXPECT_EQ(on_own.memory.runtime, 0);
  EXPECT_DOUBLE_EQ(on_shared.memory.total(), on_own.memory.total() + 3e7);
}

// A worker with others on its host holds runtime_bytes_with_peers; alone, or
// where the file has none, runtime_bytes.
TEST(Cluster, AWorkerWithPeersOnItsHostHoldsTheirRuntime) {
  const ModelDescription gpt = transformer_model("gpt", {4, 4, 128, 64, 65});
  const Workload w{.global_batch = 24, .precision = Precision::fp32};
  Cluster c = cpu_host(4, 4), one = cpu_host(1, 1);
  for (Cluster* k : {&c, &one}) k->device.runtime_bytes = {3e7, "alone"};
  EXPECT_EQ(predict(gpt, c, Layout{.dp = 4}, w).memory.runtime, 3e7);
  for (Cluster* k : {&c, &one}) k->device.runtime_bytes_with_peers = {4e7, "with peers"};
  EXPECT_EQ(predict(gpt, one, Layout{.dp = 1}, w).memory.runtime, 3e7);
  EXPECT_EQ(predict(gpt, c, Layout{.pp = 4, .micro_batches = 4}, w).memory.runtime, 4e7);
  EXPECT_EQ(predict(gpt, c, Layout{.tp = 4}, w).memory.runtime, 4e7);
  const Cluster back = parse_cluster(to_json(c), "round trip");
  EXPECT_EQ(back.device.runtime_bytes_with_peers.value, 4e7);
  EXPECT_EQ(back.device.runtime_bytes_with_peers.source, "with peers");
  c.device.runtime_bytes_with_peers = {-1, "bad"};
  EXPECT_THROW(c.validate(), Error);
}

// Note [Peers' registered pages]: a data-parallel worker on one host also
// holds the pages of its peers' registered buffers it works on, (dp − 1)/dp
// of them, and of rank 0's buffer the weights are broadcast through, at most
// the group's registered memory; not across hosts (MPI).
TEST(Cluster, ADataParallelWorkerHoldsThePagesOfItsPeersBucketsItTouches) {
  const TransformerShape small{4, 4, 128, 64, 65};
  const ModelDescription gpt = transformer_model("gpt", small);
  const Workload w{.global_batch = 24, .precision = Precision::fp32};
  const double P = total_parameters(small);
  Cluster c = cpu_host(4, 4);
  c.device.runtime_bytes = {3e7, "alone"};
  c.device.runtime_bytes_with_peers = {4e7, "with peers"};
  // ZeRO-0 reduces the gradient buckets in place and broadcasts through them;
  // ZeRO-1 and -2 also gather the weights, and broadcast through those.
  EXPECT_DOUBLE_EQ(predict(gpt, c, Layout{.dp = 4}, w).memory.runtime, 4e7 + 0.75 * (4 + 4) * P);
  EXPECT_DOUBLE_EQ(predict(gpt, c, Layout{.dp = 4, .zero = 1}, w).memory.runtime, 4e7 + 0.75 * (8 + 4) * P);
  EXPECT_DOUBLE_EQ(predict(gpt, c, Layout{.dp = 2, .tp = 2, .zero = 2}, w).memory.runtime,
                   4e7 + 0.5 * (8 + 4) * stage_work(gpt, c, Layout{.dp = 2, .tp = 2, .zero = 2}, w)[0].parameters);
  // GPT-2's buckets and weights fit in the 8 GiB a rank registers.
  const ModelDescription gpt2 = transformer_model("gpt2", {12, 12, 768, 256, 50304});
  const Layout halves{.dp = 2, .pp = 2, .micro_batches = 2, .zero = 1};
  const MemoryPrediction m = predict(gpt2, c, halves, w).memory;
  EXPECT_DOUBLE_EQ(m.runtime,
                   4e7 + 0.5 * (8 + 4) * stage_work(gpt2, c, halves, w)[static_cast<size_t>(m.stage)].parameters);
  EXPECT_DOUBLE_EQ(peer_pages(2, 1e6, 0), 5e5);
  EXPECT_DOUBLE_EQ(peer_pages(2, 1e6, 5e5), 7.5e5);
  // Beyond them the rest is plain memory.
  EXPECT_DOUBLE_EQ(peer_pages(2, 1e11, 1e11), 0.5 * 2 * 8 * (1 << 30));
  // Across hosts the group is MPI's, whose buffers are the worker's own.
  Cluster two = testing::test_cluster(64e9, 2, 2);
  two.device.runtime_bytes = {3e7, "alone"};
  two.device.runtime_bytes_with_peers = {4e7, "with peers"};
  EXPECT_EQ(predict(gpt, two, Layout{.dp = 4, .zero = 1}, w).memory.runtime, 4e7);
  EXPECT_DOUBLE_EQ(predict(gpt, two, Layout{.dp = 2, .tp = 2, .zero = 1}, w).memory.runtime, 4e7);
}

// Note [A hierarchical collective's scratch]: k members of a dp group on a
// host stage through their k pairs of scratch halves; ZeRO 1-3 also reorder
// by slice through a buffer of at most 16 MiB.
TEST(Cluster, ADataParallelWorkerAcrossHostsHoldsItsHierarchicalCollectivesScratch) {
  const double MiB = 1 << 20;
  EXPECT_DOUBLE_EQ(hierarchical_scratch(2, 0, 3 * MiB), 2 * 2 * MiB);
  EXPECT_DOUBLE_EQ(hierarchical_scratch(2, 1, 3 * MiB), 2 * 2 * MiB + 3 * MiB);
  EXPECT_DOUBLE_EQ(hierarchical_scratch(4, 3, 1e9), 4 * 2 * MiB + 16 * MiB);
  EXPECT_DOUBLE_EQ(hierarchical_scratch(2, 0, 1e5), 2e5);

  const TransformerShape small{4, 4, 128, 64, 65};
  const ModelDescription gpt = transformer_model("gpt", small);
  Workload w{.global_batch = 24, .precision = Precision::fp32};
  w.cross_host = CrossHost::hierarchical;
  Cluster two = testing::test_cluster(64e9, 2, 2);
  two.device.runtime_bytes = {3e7, "the harness's"};
  // The largest collective: DDP's largest bucket over the stage's tensors (ZeRO 0-2), the largest unit (ZeRO-3).
  const StageWork st = stage_work(gpt, two, Layout{.dp = 4}, w)[0];
  double bucket = 0;
  for (const UnitBucket& b : unit_buckets(st, w.buckets)) bucket = std::max(bucket, b.parameters);
  const std::vector<double> units = unit_parameters(st);
  const double unit = *std::max_element(units.begin(), units.end());
  EXPECT_DOUBLE_EQ(predict(gpt, two, Layout{.dp = 4}, w).memory.runtime, 3e7 + hierarchical_scratch(2, 0, 4.0 * bucket));
  EXPECT_DOUBLE_EQ(predict(gpt, two, Layout{.dp = 4, .zero = 1}, w).memory.runtime,
                   3e7 + hierarchical_scratch(2, 1, 4.0 * bucket));
  EXPECT_DOUBLE_EQ(predict(gpt, two, Layout{.dp = 4, .zero = 3}, w).memory.runtime,
                   3e7 + hierarchical_scratch(2, 3, 4 * unit));
  // One member a host: no hierarchy (tp 2 fills each host); NCCL's rings: none of artel's scratch.
  EXPECT_DOUBLE_EQ(predict(gpt, two, Layout{.dp = 2, .tp = 2, .zero = 1}, w).memory.runtime, 3e7);
  w.cross_host = CrossHost::rings;
  EXPECT_DOUBLE_EQ(predict(gpt, two, Layout{.dp = 4, .zero = 1}, w).memory.runtime, 3e7);
}

// artel's ZeRO-3 gathers and reduce-scatters hierarchically across hosts
// (a worker sends S/k across), DeepSpeed's as Table 2 measured it over each
// worker's own share (Note [ZeRO-3 over each worker's own network share]).
TEST(Cluster, ArtelsZeroThreeGathersHierarchicallyAcrossHosts) {
  const ModelDescription gpt = transformer_model("gpt", {4, 4, 128, 64, 65});
  Workload w{.global_batch = 24, .precision = Precision::fp32};
  const Cluster two = testing::test_cluster(64e9, 2, 2);
  const Layout zero3{.dp = 4, .zero = 3};
  w.cross_host = CrossHost::rings;
  const double own_share = predict(gpt, two, zero3, w).time.zero_gathers;
  w.cross_host = CrossHost::hierarchical;
  const double hierarchical = predict(gpt, two, zero3, w).time.zero_gathers;
  EXPECT_GT(hierarchical, 0);
  EXPECT_LT(hierarchical, own_share);
}

// Note [A collective's copies]: workers that share a core pay the copies of
// collectives hidden behind their compute on it; with a core each they
// hide in its idle moments.
TEST(Cluster, TimeSlicedWorkersPayTheCopiesOfHiddenCollectivesOnTheirCore) {
  EXPECT_FALSE(time_sliced(testing::test_cluster()));  // a GPU cluster
  EXPECT_FALSE(time_sliced(cpu_host(2, 2)));
  EXPECT_TRUE(time_sliced(cpu_host(4, 2)));

  const ModelDescription gpt = transformer_model("gpt", {4, 4, 128, 64, 65});
  const Workload w{.global_batch = 24, .precision = Precision::fp32};
  // 4 workers of one host, a whole core each or half of one twice as fast:
  // the same rates a worker. Compute is slow and the link instant, so every
  // collective hides behind it.
  Cluster whole = cpu_host(4, 4), shared = cpu_host(4, 2);
  shared.device.memory_bandwidth.value *= 2;
  shared.device.peak_fp32.value *= 2;
  for (Cluster* c : {&whole, &shared}) {
    c->device.peak_fp32.value *= 1e-3;
    c->intra_host = {{0, "test"}, {1e15, "test"}};
  }
  const Device worker = with_worker_speed(shared, 0.5).device;
  const StageWork st = stage_work(gpt, with_worker_speed(shared, 0.5), Layout{.dp = 4}, w)[0];
  const double bytes = 4 * st.parameters;  // fp32 weights and gradients
  auto near = [](double a, double b) { EXPECT_NEAR(a, b, 1e-4 * b); };  // less the instant link's waits

  // ZeRO-3: every unit gathered twice (its weights staged in and out, 2
  // bytes a byte) and reduce-scattered once (its registered gradients
  // summed in place, 1 + 1/4).
  const Layout zero3{.dp = 4, .zero = 3};
  const StepTime a3 = predict(gpt, whole, zero3, w).time, b3 = predict(gpt, shared, zero3, w).time;
  near(b3.compute, a3.compute);
  near(b3.zero_gathers - a3.zero_gathers, streaming_seconds(worker, bytes * (2 * 2 + 1.25)));
  // DDP: one registered all-reduce a bucket (a reduce-scatter, S + S/4, then an all-gather, 2·S).
  const StepTime a0 = predict(gpt, whole, Layout{.dp = 4}, w).time, b0 = predict(gpt, shared, Layout{.dp = 4}, w).time;
  near(b0.data_parallel - a0.data_parallel, streaming_seconds(worker, bytes * (1.25 + 2)));
  EXPECT_GT(b0.data_parallel - a0.data_parallel, 0);
}

TEST(Cluster, RefusesAFractionalCoreCount) {
  nlohmann::ordered_json j = to_json(testing::test_cluster());
  j["cores_per_host"] = 1.5;
  EXPECT_THROW(parse_cluster(j, "bad"), Error);
}

}  // namespace
}  // namespace artel::plan
