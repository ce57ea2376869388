// One published training run as the planner sees it (tests/plan/data/*.json):
// the model's shape, the layout, the workload, the GPUs and the step time the
// paper reports (or implies, through its FLOP count, when it reports
// TFLOP/s per GPU), plus the helpers the published-table tests share:
// reading a table, calibrating the GEMM efficiency on one run, and the
// median of the errors.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "artel/plan/efficiency_calibration.h"
#include "artel/plan/step_model.h"
#include "artel/plan/transformer_shape.h"

namespace artel::plan::testing {

struct PublishedRun {
  std::string label;  // how the output names the row
  TransformerShape shape;
  Layout layout;
  Workload workload;
  int64_t gpus = 0;
  double step_s = 0;  // the published step time
};

inline nlohmann::json read_table(const std::string& relative) {
  std::ifstream in(std::string(ARTEL_SOURCE_DIR) + "/" + relative);
  EXPECT_TRUE(in.good()) << relative;
  return nlohmann::json::parse(in);
}

inline Cluster selene() { return read_cluster(std::string(ARTEL_SOURCE_DIR) + "/data/clusters/selene.json"); }

inline Workload workload_of(const nlohmann::json& table, int64_t batch) {
  const nlohmann::json& w = table["workload"];
  Workload out;
  out.global_batch = batch;
  out.precision = parse_precision(w["precision"]);
  out.state = w["state"] == "mixed" ? StateBytes::mixed_adamw() : StateBytes::artel_adamw();
  out.overlap_grad_reduce = w["overlap_grad_reduce"];
  out.scatter_gather_sends = w["scatter_gather_sends"];
  out.dropout = w["dropout"];
  out.activations = parse_activations(w["activations"]);
  return out;
}

inline TransformerShape shape_of(const nlohmann::json& table, const nlohmann::json& row) {
  return {row["layers"], row["heads"], row["hidden"], table["sequence"], table["vocab"]};
}

// TFLOP/s per GPU as Narayanan et al. 2021 count them (eq. 3), from a step time.
inline double tflops_per_gpu(const PublishedRun& r, double step_s) {
  return narayanan_iteration_flops(r.shape, static_cast<double>(r.workload.global_batch)) / step_s /
         static_cast<double>(r.gpus) / 1e12;
}

// The step time a published TFLOP/s per GPU implies (the inverse of the above).
inline double step_of_tflops(const TransformerShape& shape, int64_t batch, int64_t gpus, double tflops) {
  return narayanan_iteration_flops(shape, static_cast<double>(batch)) / (tflops * 1e12 * static_cast<double>(gpus));
}

inline Prediction predict_run(const Cluster& cluster, const PublishedRun& r) {
  return predict(transformer_model(r.label, r.shape), cluster.with_workers(r.gpus), r.layout, r.workload);
}

// Selene with the GEMM efficiency at which the planner reproduces `run`'s
// published step: one calibration point for one software generation.
inline Cluster calibrated_on(const Cluster& cluster, const PublishedRun& run, const std::string& software) {
  const double e = calibrate_gemm_efficiency(transformer_model(run.label, run.shape), cluster.with_workers(run.gpus),
                                             run.layout, run.workload, run.step_s);
  std::printf("%s: calibrated on row %s (%s, %lld GPUs, published step %.2f s): GEMM efficiency %.4f\n",
              software.c_str(), run.label.c_str(), describe(run.layout).c_str(), static_cast<long long>(run.gpus),
              run.step_s, e);
  return with_gemm_efficiency(cluster, e, software + ", calibrated on " + run.label);
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace artel::plan::testing
