#include "artel/train/run_report.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "artel/core/error.h"
#include "artel/core/json_file.h"
#include "artel/core/regular_file.h"
#include "artel/train/svg.h"
#include "artel/train/trace_export.h"

namespace artel::train {

namespace {

constexpr double kChartWidth = 960, kChartX0 = 90, kChartX1 = 780, kPanelHeight = 190, kPanelGap = 70, kChartTop = 60;
constexpr size_t kMaxPoints = 600;

struct Series {
  std::string name;
  const char* colour;
  std::vector<std::pair<double, double>> points;  // (step, value)
  bool dots = false;                              // evaluations: a dot each
};

// At most kMaxPoints points: consecutive points averaged in equal groups.
std::vector<std::pair<double, double>> thinned(const std::vector<std::pair<double, double>>& p) {
  if (p.size() <= kMaxPoints) return p;
  std::vector<std::pair<double, double>> out;
  const size_t group = (p.size() + kMaxPoints - 1) / kMaxPoints;
  for (size_t i = 0; i < p.size(); i += group) {
    const size_t end = std::min(p.size(), i + group);
    double x = 0, y = 0;
    for (size_t j = i; j < end; ++j) x += p[j].first, y += p[j].second;
    out.emplace_back(x / static_cast<double>(end - i), y / static_cast<double>(end - i));
  }
  return out;
}

std::string axis_label(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", std::abs(v) < 1e-12 ? 0.0 : v);
  return buf;
}

// One panel: its frame, y ticks, the series, a legend; x from x0 to x1 (steps).
std::string panel(double top, const std::string& title, const std::vector<Series>& series, double x0, double x1) {
  std::string out = svg::text(kChartX0, top - 10, title, "font-weight=\"bold\"");
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (const Series& s : series)
    for (const auto& [x, y] : s.points)
      if (std::isfinite(y)) lo = std::min(lo, y), hi = std::max(hi, y);
  const double bottom = top + kPanelHeight;
  out += svg::rect("frame", kChartX0, top, kChartX1 - kChartX0, kPanelHeight, "#fafafa");
  if (!std::isfinite(lo)) return out + svg::text(kChartX0 + 10, top + 24, "nothing recorded yet");
  if (hi - lo < 1e-12) lo -= 1, hi += 1;
  const double pad = (hi - lo) * 0.05;
  lo -= pad, hi += pad;
  auto X = [&](double x) { return kChartX0 + (x1 > x0 ? (x - x0) / (x1 - x0) : 0.5) * (kChartX1 - kChartX0); };
  auto Y = [&](double y) { return bottom - (y - lo) / (hi - lo) * kPanelHeight; };
  const double step = svg::tick_step(hi - lo, 5);
  for (double v = std::ceil(lo / step) * step; v <= hi; v += step) {
    out += svg::line(kChartX0 - 4, Y(v), kChartX1, Y(v), "#dddddd");
    out += svg::text(kChartX0 - 8, Y(v) + 4, axis_label(v), "text-anchor=\"end\" font-size=\"11\"");
  }
  double legend_y = top + 16;
  for (const Series& s : series) {
    if (s.points.empty()) continue;
    std::string path;
    for (const auto& [x, y] : thinned(s.points))
      if (std::isfinite(y)) path += (path.empty() ? "M" : " L") + svg::num(X(x)) + " " + svg::num(Y(y));
    out += "<path class=\"" + s.name + "\" d=\"" + path + "\" fill=\"none\" stroke=\"" + s.colour +
           "\" stroke-width=\"1.5\"/>\n";
    if (s.dots)
      for (const auto& [x, y] : s.points)
        if (std::isfinite(y))
          out += "<circle cx=\"" + svg::num(X(x)) + "\" cy=\"" + svg::num(Y(y)) + "\" r=\"3\" fill=\"" + s.colour + "\"/>\n";
    out += svg::rect("swatch", kChartX1 + 14, legend_y - 10, 12, 12, s.colour);
    out += svg::text(kChartX1 + 32, legend_y, s.name, "font-size=\"12\"");
    legend_y += 20;
  }
  return out;
}

std::string x_axis(double y, double x0, double x1) {
  std::string out = svg::line(kChartX0, y, kChartX1, y);
  const double span = std::max(1.0, x1 - x0);
  const double step = std::max(1.0, svg::tick_step(span, 8));
  for (double v = std::ceil(x0 / step) * step; v <= x1 + 1e-9; v += step) {
    const double x = kChartX0 + (x1 > x0 ? (v - x0) / (x1 - x0) : 0.5) * (kChartX1 - kChartX0);
    out += svg::line(x, y, x, y + 5) + svg::text(x, y + 18, axis_label(v), "text-anchor=\"middle\" font-size=\"11\"");
  }
  return out + svg::text(kChartX1, y + 34, "step", "text-anchor=\"end\" font-size=\"11\"");
}

// The fields the report draws are numbers, or null: a NaN or infinite
// value is written as null (JSON has no NaN) and leaves a gap. Any other
// type is not a run's metrics, and was skipped in silence.
void check_drawn_fields(const nlohmann::json& j, const std::string& path, int64_t number) {
  for (const char* key : {"step", "loss", "val_loss", "tokens_per_s", "samples_per_s", "t_comp_ms", "t_sync_ms",
                          "step_ms"}) {
    const auto it = j.find(key);
    if (it == j.end() || it->is_number() || it->is_null()) continue;
    throw Error(path + ": line " + std::to_string(number) + ": \"" + key + "\" is " + it->type_name() +
                    ", not a number: " + printable(it->dump().substr(0, 40)),
                "metrics.jsonl holds one JSON object a line, as `artel train` writes it");
  }
}

}  // namespace

std::vector<nlohmann::json> read_metrics(const std::string& path) {
  check_file_path(path, "metrics file", "pass a run directory (it holds metrics.jsonl)");  // a directory read as empty
  std::ifstream in(path);
  if (!in) throw Error("cannot open " + path, "pass a run directory (it holds metrics.jsonl)");
  std::vector<nlohmann::json> lines;
  // Only a run's writer can leave a line unfinished, and only its last one,
  // which begins as every line does. Any other line that does not parse means
  // the file is not a run's metrics, and a report drawn from the rest would lie.
  auto refuse = [&](int64_t number, const std::string& line) {
    return Error(path + ": line " + std::to_string(number) + " is not a JSON object: " + printable(line.substr(0, 40)),
                 "metrics.jsonl holds one JSON object a line, as `artel train` writes it");
  };
  std::string unfinished;  // the last line so far, when it did not parse
  int64_t number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    if (!unfinished.empty()) throw refuse(number - 1, unfinished);  // not the last after all
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_object()) check_drawn_fields(j, path, number), lines.push_back(std::move(j));
    else if (!line.empty() && line.front() != '{') throw refuse(number, line);
    else unfinished = line;
  }
  return lines;
}

std::string run_report_svg(const std::vector<nlohmann::json>& lines, const std::string& title) {
  Series loss{"train loss", "#4e79a7"}, val{"validation loss", "#f28e2b", {}, true};
  Series rate{"tokens/s", "#59a14f"}, comp{"T_comp (ms)", "#4e79a7"}, sync{"exposed T_sync (ms)", "#e15759"};
  for (const nlohmann::json& j : lines) {
    if (!j.contains("step") || !j["step"].is_number()) continue;
    const double k = j["step"].get<double>();
    auto add = [&](Series& s, const char* key) {
      if (j.contains(key) && j[key].is_number()) s.points.emplace_back(k, j[key].get<double>());
    };
    if (j.contains("loss")) {
      add(loss, "loss");
      add(rate, "tokens_per_s");
      if (j.contains("samples_per_s")) rate.name = "samples/s", add(rate, "samples_per_s");
      if (j.contains("t_comp_ms")) {
        add(comp, "t_comp_ms");
        add(sync, "t_sync_ms");
      } else {  // one worker: nothing to synchronise, the whole step is compute
        comp.name = "step (ms), one worker";
        add(comp, "step_ms");
      }
    }
    add(val, "val_loss");
  }
  double x0 = std::numeric_limits<double>::infinity(), x1 = -x0;
  for (const Series* s : {&loss, &val})
    for (const auto& [x, y] : s->points) x0 = std::min(x0, x), x1 = std::max(x1, x);
  if (!std::isfinite(x0)) x0 = 0, x1 = 1;
  double top = kChartTop;
  std::string out = svg::text(kChartWidth / 2, 28, title, "text-anchor=\"middle\" font-size=\"15\" font-weight=\"bold\"");
  out += panel(top, "loss", {loss, val}, x0, x1);
  top += kPanelHeight + kPanelGap;
  out += panel(top, "throughput", {rate}, x0, x1);
  top += kPanelHeight + kPanelGap;
  out += panel(top, "time per step: compute against exposed synchronisation", {comp, sync}, x0, x1);
  out += x_axis(top + kPanelHeight, x0, x1);
  const double height = top + kPanelHeight + 50;
  return svg::open(kChartWidth, height) + out + svg::close();
}

std::string write_run_report(const std::string& run_dir) {
  const std::filesystem::path dir(run_dir);
  const std::string path = (dir / "report.svg").string();
  write_text_file(path, run_report_svg(read_metrics((dir / "metrics.jsonl").string()), run_dir));
  return path;
}

}  // namespace artel::train
