// pipeline_svg (declared in trace_export.h): stages × time as a plain SVG.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "artel/train/svg.h"
#include "artel/train/trace_export.h"

namespace artel::train {
namespace {

using svg::num;
using svg::rect;
using svg::text;

constexpr double kWidth = 960, kPlotX0 = 190, kPlotX1 = 850;  // label column | plot | idle share
constexpr double kTop = 44, kRowHeight = 24, kRowPitch = 30;
constexpr const char* kForwardFill = "#4e79a7";
constexpr const char* kBackwardFill = "#f28e2b";
constexpr const char* kIdleFill = "#eeeeee";

// One stage: its lane (idle colour), its forward/backward blocks, its label and idle share.
std::string row_svg(const SvgRow& row, double y, int64_t origin_ns, double window_ns, double idle_share) {
  std::string out = rect("lane", kPlotX0, y, kPlotX1 - kPlotX0, kRowHeight, kIdleFill);
  const double scale = window_ns > 0 ? (kPlotX1 - kPlotX0) / window_ns : 0;
  for (const auto& e : row.events) {
    if (e.category != "compute" || (e.name != "forward" && e.name != "backward")) continue;
    const double x = kPlotX0 + static_cast<double>(e.start_ns - origin_ns) * scale;
    const double w = std::max(0.5, static_cast<double>(e.dur_ns) * scale);
    std::string tip = e.name + (e.micro_batch >= 0 ? " micro-batch " + std::to_string(e.micro_batch) : "") + ", " +
                      num(static_cast<double>(e.dur_ns) / 1e6) + " ms";
    out += rect(e.name, x, y, w, kRowHeight, e.name == "forward" ? kForwardFill : kBackwardFill, tip);
    const std::string mb = std::to_string(e.micro_batch);
    if (e.micro_batch >= 0 && w >= 6 + 7.0 * static_cast<double>(mb.size()))
      out += text(x + w / 2, y + kRowHeight / 2 + 4, mb, "text-anchor=\"middle\" fill=\"#ffffff\" font-size=\"11\"");
  }
  out += text(kPlotX0 - 8, y + kRowHeight / 2 + 4, row.label, "text-anchor=\"end\"");
  out += text(kPlotX1 + 8, y + kRowHeight / 2 + 4, "idle " + num(100 * idle_share) + "%");
  return out;
}

std::string axis_svg(double y, double window_ms) {
  std::string out = svg::line(kPlotX0, y, kPlotX1, y);
  if (window_ms <= 0) return out + text(kPlotX0, y + 18, "no compute events in this window");
  const double step = svg::tick_step(window_ms);
  for (int i = 0; i * step <= window_ms * (1 + 1e-9); ++i) {
    const double x = kPlotX0 + i * step / window_ms * (kPlotX1 - kPlotX0);
    char label[32];
    std::snprintf(label, sizeof label, "%g", i * step);
    out += svg::line(x, y, x, y + 5);
    out += text(x, y + 18, label, "text-anchor=\"middle\" font-size=\"11\"");
  }
  return out + text(kPlotX1, y + 34, "time (ms)", "text-anchor=\"end\" font-size=\"11\"");
}

std::string legend_svg(double y) {
  std::string out;
  double x = kPlotX0;
  for (auto [name, fill] : {std::pair{"forward", kForwardFill}, {"backward", kBackwardFill}, {"idle", kIdleFill}}) {
    out += rect("swatch", x, y - 11, 14, 14, fill);
    out += text(x + 20, y, name);
    x += 110;
  }
  return out;
}

}  // namespace

std::string pipeline_svg(const std::vector<SvgRow>& rows, const std::string& title) {
  const Utilisation u = utilisation(rows);
  const double axis_y = kTop + static_cast<double>(rows.size()) * kRowPitch + 2;
  const double legend_y = axis_y + 58;
  const double height = legend_y + 16;
  std::string out = svg::open(kWidth, height);
  out += text(kWidth / 2, 24, title, "text-anchor=\"middle\" font-size=\"15\" font-weight=\"bold\"");
  for (size_t i = 0; i < rows.size(); ++i)
    out += row_svg(rows[i], kTop + static_cast<double>(i) * kRowPitch, u.window_start_ns, u.window_ms * 1e6, u.idle_share[i]);
  out += axis_svg(axis_y, u.window_ms);
  out += legend_svg(legend_y);
  return out + svg::close();
}

}  // namespace artel::train
