#include "artel/train/metrics_writer.h"

#include <cmath>
#include <string>
#include <vector>

#include "artel/core/error.h"
#include "artel/train/trace_export.h"

namespace artel::train {

namespace {
// JSON has no NaN or infinity; a non-finite value is written as null so the
// line stays parseable (the trainer stops on a non-finite loss anyway).
nlohmann::ordered_json number(double v) {
  return std::isfinite(v) ? nlohmann::ordered_json(v) : nlohmann::ordered_json(nullptr);
}
}  // namespace

MetricsWriter::MetricsWriter(const std::string& path) : path_(path), out_(path, std::ios::trunc) {
  if (!out_) throw Error("cannot create " + path, "check that --out names a writable directory");
}

MetricsWriter::MetricsWriter(const std::string& path, int64_t last_step) : path_(path) {
  std::string kept;
  {
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);) {
      nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (j.is_object() && j.contains("step") && j["step"].is_number_integer() && j["step"].get<int64_t>() <= last_step)
        kept += line + "\n";
    }
  }
  // Replaced whole (written aside, then renamed): a run killed here again
  // keeps the steps it had, not an emptied file.
  write_text_file(path, kept);
  out_.open(path, std::ios::app);
  if (!out_) throw Error("cannot create " + path, "check that --out names a writable directory");
}

nlohmann::ordered_json MetricsWriter::to_json(const StepMetrics& m) {
  nlohmann::ordered_json j = {{"step", m.step}, {"loss", number(m.loss)}, {"lr", number(m.lr)}};
  j[m.items_name] = number(m.items_per_s);
  j["step_ms"] = number(m.step_ms);
  if (m.t_comp_ms) j["t_comp_ms"] = number(*m.t_comp_ms);
  if (m.t_sync_ms) j["t_sync_ms"] = number(*m.t_sync_ms);
  for (const auto& [key, value] : m.extra.items()) j[key] = value;
  return j;
}

nlohmann::ordered_json MetricsWriter::to_json(const EvalMetrics& m) {
  nlohmann::ordered_json j = {{"step", m.step}, {"val_loss", number(m.val_loss)}};
  if (m.val_accuracy) j["val_accuracy"] = number(*m.val_accuracy);
  if (m.elapsed_s) j["elapsed_s"] = number(*m.elapsed_s);
  return j;
}

void MetricsWriter::step(const StepMetrics& m) {
  write(to_json(m));
  if (std::chrono::steady_clock::now() - last_flush_ >= std::chrono::seconds(1)) flush();
}

void MetricsWriter::eval(const EvalMetrics& m) {
  write(to_json(m));
  flush();
}

void MetricsWriter::memory(const std::vector<MemoryReport>& workers) {
  nlohmann::ordered_json all = nlohmann::ordered_json::array();
  for (const MemoryReport& m : workers) all.push_back(m.to_json());
  write({{"memory", all}});
  flush();
}

void MetricsWriter::record(const nlohmann::ordered_json& line) {
  write(line);
  flush();
}

void MetricsWriter::write(const nlohmann::ordered_json& j) {
  out_ << j.dump() << '\n';
  if (!out_) throw Error("cannot write " + path_, "is the disk full?");
}

void MetricsWriter::flush() {
  out_.flush();
  last_flush_ = std::chrono::steady_clock::now();
  if (!out_) throw Error("cannot write " + path_, "is the disk full?");
}

}  // namespace artel::train
