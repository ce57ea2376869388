// The planner against published measurements on Selene (A100 80GB): the
// figures live in tests/plan/data/*.json with their sources, the
// assumptions each row needs and the one row that calibrates each software
// generation; the cluster is data/clusters/selene.json, vendor rates only.
//
// Calibration, not fitting: a GEMM efficiency is a property of the
// software stack and the GPU, so each generation of software gets one
// calibration point — the GEMM efficiency at which the planner itself
// reproduces one published run (plan/efficiency_calibration.h) — and that
// run is left out of the errors. Every other row is predicted.
//
// Targets (issue 25): Narayanan 2021 Table 1, median error <= 15%; Table 2,
// PTD-P ranked above ZeRO-3 in every row and ZeRO-3's per-GPU throughput
// falling as GPUs double at a fixed batch; Korthikanti 2022 Table 5, median
// error <= 15%. Each test prints predicted against published.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "artel/plan/memory_model.h"
#include "published_run.h"

namespace artel::plan {
namespace {

using namespace testing;

// Narayanan et al. 2021, Table 1 and Table 2's PTD-P: Megatron-LM, micro-batch 1, full recomputation.
PublishedRun narayanan_run(const nlohmann::json& table, const nlohmann::json& row, const nlohmann::json& run,
                           const std::string& label) {
  const int64_t gpus = run["gpus"], batch = run["batch"], tp = run["tp"], pp = run["pp"];
  const int64_t dp = gpus / (tp * pp);
  PublishedRun r;
  r.label = label;
  r.shape = shape_of(table, row);
  r.layout = Layout{.dp = dp,
                    .tp = tp,
                    .pp = pp,
                    .micro_batches = batch / dp,
                    .schedule = parse_schedule(run["schedule"]),
                    .chunks = run["chunks"],
                    .recompute = Recompute::full};
  r.workload = workload_of(table, batch);
  r.gpus = gpus;
  r.step_s = step_of_tflops(r.shape, batch, gpus, run["tflops_per_gpu"]);
  return r;
}

std::string params_label(const nlohmann::json& row) {
  char s[32];
  std::snprintf(s, sizeof s, "%.1fB", row["params_b"].get<double>());
  return s;
}

// Megatron-LM (2021): calibrated on Table 1's calibration row; also the software of Table 2's PTD-P.
Cluster megatron_2021() {
  const nlohmann::json table = read_table("tests/plan/data/narayanan2021_table1.json");
  const nlohmann::json& row = table["rows"][table["calibration"]["row"].get<size_t>()];
  return calibrated_on(selene(), narayanan_run(table, row, row, params_label(row)),
                       table["calibration"]["software"]);
}

TEST(PublishedTables, Narayanan2021Table1MedianErrorWithin15Percent) {
  const nlohmann::json table = read_table("tests/plan/data/narayanan2021_table1.json");
  const Cluster cluster = megatron_2021();
  const size_t calibration_row = table["calibration"]["row"];
  std::vector<double> errors;
  std::printf("Narayanan et al. 2021, Table 1 (TFLOP/s per GPU)\n");
  std::printf("%8s %3s %3s %5s %5s %9s %9s %7s  step_s compute   tp  send bubble   dp  (shares)\n", "params", "tp",
              "pp", "gpus", "batch", "published", "predicted", "error");
  for (size_t i = 0; i < table["rows"].size(); ++i) {
    const nlohmann::json& row = table["rows"][i];
    const PublishedRun r = narayanan_run(table, row, row, params_label(row));
    const Prediction p = predict_run(cluster, r);
    const double predicted = tflops_per_gpu(r, p.time.step), published = row["tflops_per_gpu"];
    const double error = predicted / published - 1;
    if (i != calibration_row) errors.push_back(std::abs(error));
    const double s = p.time.step;
    std::printf("%8s %3lld %3lld %5lld %5lld %9.0f %9.1f %+6.1f%% %7.2f %6.1f%% %4.1f%% %4.1f%% %5.1f%% %4.1f%%%s\n",
                r.label.c_str(), static_cast<long long>(r.layout.tp), static_cast<long long>(r.layout.pp),
                static_cast<long long>(r.gpus), static_cast<long long>(r.workload.global_batch), published,
                predicted, 100 * error, s, 100 * p.time.compute / s, 100 * p.time.tensor_parallel / s,
                100 * p.time.pipeline_sends / s, 100 * p.time.bubble / s, 100 * p.time.data_parallel / s,
                i == calibration_row ? "  (calibration row)" : "");
  }
  const double med = median(errors), worst = *std::max_element(errors.begin(), errors.end());
  std::printf("median |error| %.1f%%, worst %.1f%% over the %zu predicted rows\n", 100 * med, 100 * worst,
              errors.size());
  EXPECT_LE(med, 0.15);
}


// Narayanan et al. 2021, Table 2's ZeRO-3 (DeepSpeed): data parallelism
// alone, one micro-batch of batch / GPUs sequences, full recomputation.
PublishedRun zero3_run(const nlohmann::json& table, const nlohmann::json& pair) {
  const nlohmann::json& z = pair["zero3"];
  const int64_t gpus = z["gpus"], batch = z["batch"];
  PublishedRun r;
  r.label = pair["model"].get<std::string>() + " ZeRO-3 on " + std::to_string(gpus);
  r.shape = shape_of(table, pair);
  r.layout = Layout{.dp = gpus, .micro_batches = 1, .zero = 3, .recompute = Recompute::full};
  r.workload = workload_of(table, batch);
  r.gpus = gpus;
  r.step_s = step_of_tflops(r.shape, batch, gpus, z["tflops_per_gpu"]);
  return r;
}

struct Table2Row {
  double zero3_published, zero3, ptdp_published, ptdp;
};

// Predicted against published, ZeRO-3 under DeepSpeed's calibration and,
// for comparison, under Megatron-LM's.
std::vector<Table2Row> table2(const nlohmann::json& table, const Cluster& deepspeed, const Cluster& megatron) {
  std::printf("Narayanan et al. 2021, Table 2 (TFLOP/s per GPU)\n");
  std::printf("%8s | %5s %5s %9s %9s %7s %10s | %5s %5s %9s %9s %7s\n", "model", "gpus", "batch", "ZeRO-3",
              "predicted", "error", "(Megatron)", "gpus", "batch", "PTD-P", "predicted", "error");
  const size_t calibration_row = table["calibration"]["zero3"]["row"];
  std::vector<Table2Row> rows;
  std::vector<double> zero3_errors, ptdp_errors;
  for (size_t i = 0; i < table["pairs"].size(); ++i) {
    const nlohmann::json& pair = table["pairs"][i];
    const PublishedRun z = zero3_run(table, pair);
    const PublishedRun d = narayanan_run(table, pair, pair["ptdp"], pair["model"]);
    const Table2Row row{pair["zero3"]["tflops_per_gpu"], tflops_per_gpu(z, predict_run(deepspeed, z).time.step),
                        pair["ptdp"]["tflops_per_gpu"], tflops_per_gpu(d, predict_run(megatron, d).time.step)};
    const double zero3_at_megatron = tflops_per_gpu(z, predict_run(megatron, z).time.step);
    const double zero3_error = row.zero3 / row.zero3_published - 1, ptdp_error = row.ptdp / row.ptdp_published - 1;
    if (i != calibration_row) zero3_errors.push_back(std::abs(zero3_error));
    ptdp_errors.push_back(std::abs(ptdp_error));
    std::printf("%8s | %5lld %5lld %9.0f %9.1f %+6.1f%% %10.1f | %5lld %5lld %9.0f %9.1f %+6.1f%%%s\n",
                pair["model"].get<std::string>().c_str(), static_cast<long long>(z.gpus),
                static_cast<long long>(z.workload.global_batch), row.zero3_published, row.zero3, 100 * zero3_error,
                zero3_at_megatron, static_cast<long long>(d.gpus), static_cast<long long>(d.workload.global_batch),
                row.ptdp_published, row.ptdp, 100 * ptdp_error,
                i == calibration_row ? "  (ZeRO-3 calibration row)" : "");
    rows.push_back(row);
  }
  std::printf("median |error|: ZeRO-3 %.1f%% (worst %.1f%%) over %zu predicted rows, PTD-P %.1f%% (worst %.1f%%)\n",
              100 * median(zero3_errors), 100 * *std::max_element(zero3_errors.begin(), zero3_errors.end()),
              zero3_errors.size(), 100 * median(ptdp_errors),
              100 * *std::max_element(ptdp_errors.begin(), ptdp_errors.end()));
  return rows;
}

TEST(PublishedTables, Narayanan2021Table2PtdpAboveZero3AndZero3FallsWithGpus) {
  const nlohmann::json table = read_table("tests/plan/data/narayanan2021_table2.json");
  const nlohmann::json& calibration = table["calibration"]["zero3"];
  const Cluster deepspeed = calibrated_on(
      selene(), zero3_run(table, table["pairs"][calibration["row"].get<size_t>()]), calibration["software"]);
  const std::vector<Table2Row> rows = table2(table, deepspeed, megatron_2021());
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_GT(rows[i].ptdp, rows[i].zero3) << "row " << i + 1;
    // Rows come in threes per model, GPUs doubling at a fixed batch.
    if (i % 3 != 2) {
      EXPECT_LT(rows[i + 1].zero3, rows[i].zero3) << "ZeRO-3 row " << i + 1 << " -> " << i + 2;
    }
  }
}

// Korthikanti et al. 2022, Table 5: Megatron-LM, micro-batch 1, no data parallelism.
PublishedRun korthikanti_run(const nlohmann::json& table, const nlohmann::json& row, const std::string& variant) {
  const int64_t gpus = row["gpus"], batch = row["batch"];
  const bool baseline = variant == "full_recompute_s";
  PublishedRun r;
  r.label = row["model"].get<std::string>() + (baseline ? " full recompute" : " sp + selective");
  r.shape = shape_of(table, row);
  r.layout = Layout{.dp = 1,
                    .tp = row["tp"],
                    .pp = row["pp"],
                    .micro_batches = batch,
                    .recompute = baseline ? Recompute::full : Recompute::selective,
                    .sequence_parallel = !baseline};
  r.workload = workload_of(table, batch);
  r.gpus = gpus;
  r.step_s = row[variant];
  return r;
}

TEST(PublishedTables, Korthikanti2022Table5MedianErrorWithin15Percent) {
  const nlohmann::json table = read_table("tests/plan/data/korthikanti2022_table5.json");
  const nlohmann::json& calibration = table["calibration"];
  const Cluster cluster =
      calibrated_on(selene(), korthikanti_run(table, table["rows"][calibration["row"].get<size_t>()], calibration["variant"]),
                    calibration["software"]);
  std::vector<double> errors;
  std::printf("Korthikanti et al. 2022, Table 5 (seconds per iteration)\n");
  std::printf("%-20s %9s %9s %7s  compute recomp    tp  send bubble\n", "row", "published", "predicted", "error");
  for (size_t i = 0; i < table["rows"].size(); ++i) {
    for (const char* variant : {"full_recompute_s", "sequence_parallel_selective_s"}) {
      const PublishedRun r = korthikanti_run(table, table["rows"][i], variant);
      const bool calibrating = i == calibration["row"].get<size_t>() && variant == calibration["variant"];
      const Prediction p = predict_run(cluster, r);
      const double s = p.time.step, error = s / r.step_s - 1;
      if (!calibrating) errors.push_back(std::abs(error));
      std::printf("%-20s %9.2f %9.2f %+6.1f%% %6.1f%% %5.1f%% %4.1f%% %4.1f%% %5.1f%%%s\n", r.label.c_str(), r.step_s,
                  s, 100 * error, 100 * p.time.compute / s, 100 * p.time.recompute / s,
                  100 * p.time.tensor_parallel / s, 100 * p.time.pipeline_sends / s, 100 * p.time.bubble / s,
                  calibrating ? "  (calibration row)" : "");
    }
  }
  const double med = median(errors), worst = *std::max_element(errors.begin(), errors.end());
  std::printf("median |error| %.1f%%, worst %.1f%% over the %zu predicted rows\n", 100 * med, 100 * worst,
              errors.size());
  EXPECT_LE(med, 0.15);
}

// Korthikanti et al. 2022 (Figure 1, recalled, qualitative): on 80 GB
// A100s the 175B, 530B and 1T layouts of Table 3 do not fit without
// recomputation, and do with sequence parallelism and selective
// recomputation (as with full recomputation). Memory needs no calibration.
TEST(PublishedTables, Korthikanti2022OnlyRecomputationOrSequenceParallelismFits) {
  const nlohmann::json table = read_table("tests/plan/data/korthikanti2022_table5.json");
  const Cluster cluster = selene();
  for (const nlohmann::json& row : table["rows"]) {
    if (row["model"] == "22B") continue;
    const TransformerShape shape = shape_of(table, row);
    const int64_t gpus = row["gpus"], batch = row["batch"];
    const ModelDescription model = transformer_model(row["model"], shape);
    auto memory = [&](Recompute r, bool sp) {
      const Layout l{
          .dp = 1, .tp = row["tp"], .pp = row["pp"], .micro_batches = batch, .recompute = r, .sequence_parallel = sp};
      return predict_memory(model, cluster.with_workers(gpus), l, workload_of(table, batch));
    };
    const MemoryPrediction none = memory(Recompute::none, false), full = memory(Recompute::full, false),
                           ours = memory(Recompute::selective, true);
    std::printf("%5s: no recompute %6.1f GiB, full %6.1f GiB, sp + selective %6.1f GiB of %.0f\n",
                row["model"].get<std::string>().c_str(), none.total() / (1 << 30), full.total() / (1 << 30),
                ours.total() / (1 << 30), none.capacity / (1 << 30));
    EXPECT_FALSE(none.fits()) << row["model"];
    EXPECT_TRUE(full.fits()) << row["model"];
    EXPECT_TRUE(ours.fits()) << row["model"];
  }
}

}  // namespace
}  // namespace artel::plan
