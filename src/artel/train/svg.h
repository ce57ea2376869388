// The few SVG pieces artel's pictures are drawn with (the pipeline timeline,
// trace_export.h, and the run report, run_report.h): plain, self-contained
// SVG text, no scripts.
//
//   std::string s = svg::text(10, 20, "loss < 2", "font-size=\"11\"");
//   s += svg::rect("bar", x, y, w, h, "#4e79a7", "forward, 3 ms");
#pragma once

#include <string>

namespace artel::train::svg {

std::string num(double v);               // "%.2f"
std::string escape(const std::string& s);  // & < > "
std::string text(double x, double y, const std::string& s, const std::string& attrs = "");
std::string rect(const std::string& cls, double x, double y, double w, double h, const char* fill,
                 const std::string& tip = "");
std::string line(double x1, double y1, double x2, double y2, const char* stroke = "#333333");
// A round spacing (1, 2 or 5 × 10^k) giving about `ticks` ticks over `span`.
double tick_step(double span, int ticks = 8);
// The opening <svg> element (white background) and the closing one.
std::string open(double width, double height);
inline std::string close() { return "</svg>\n"; }

}  // namespace artel::train::svg
