#include "artel/launch/memory_size.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "artel/core/error.h"

namespace artel::launch {
namespace {

constexpr const char* kHint = "write a number of bytes or one with a binary unit: 1500000000, 512M, 512MiB, 3G, 3GiB";

int unit_shift(char letter) {
  switch (std::toupper(static_cast<unsigned char>(letter))) {
    case 'K': return 10;
    case 'M': return 20;
    case 'G': return 30;
    case 'T': return 40;
    default: return -1;
  }
}

}  // namespace

int64_t parse_memory_size(const std::string& text) {
  auto bad = [&](const std::string& why) { return Error("'" + text + "' is not a memory size: " + why, kHint); };
  const char* begin = text.data();
  const char* end = begin + text.size();
  double value = 0;
  auto [num_end, ec] = std::from_chars(begin, end, value, std::chars_format::fixed);
  if (text.empty() || ec != std::errc() || !std::isfinite(value) || text[0] == '-' || text[0] == '+')
    throw bad("it must start with a number");
  std::string unit(num_end, end);
  int shift = 0;
  if (!unit.empty()) {
    shift = unit_shift(unit[0]);
    std::string rest = unit.substr(1);
    if (shift < 0 || !(rest.empty() || rest == "iB" || rest == "ib" || rest == "IB")) {
      if (shift >= 0 && (rest == "B" || rest == "b"))
        throw bad("'" + unit + "' could mean 10^" + std::to_string(shift / 10 * 3) + " or 2^" + std::to_string(shift) +
                  " bytes; write " + unit.substr(0, 1) + " or " + unit.substr(0, 1) + "iB (binary)");
      throw bad("unknown unit '" + unit + "'");
    }
  }
  if (shift == 0 && num_end != end) throw bad("unknown unit '" + unit + "'");
  if (shift == 0 && std::floor(value) != value) throw bad("a number of bytes must be whole");
  double bytes = std::ldexp(value, shift);
  if (!(bytes >= 1)) throw bad("it must be at least 1 byte");
  if (bytes >= std::ldexp(1.0, 62)) throw bad("it is larger than any machine's memory");
  return static_cast<int64_t>(std::llround(bytes));
}

std::string format_memory_size(int64_t bytes) {
  static const char* const kUnits[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (u + 1 < 5 && bytes >= (int64_t{1} << (10 * (u + 1)))) ++u;
  if (u == 0) return std::to_string(bytes) + " bytes";
  int64_t unit = int64_t{1} << (10 * u);
  char text[48];
  if (bytes % unit == 0)
    std::snprintf(text, sizeof text, "%lld %s", static_cast<long long>(bytes / unit), kUnits[u]);
  else
    std::snprintf(text, sizeof text, "%.2f %s", static_cast<double>(bytes) / static_cast<double>(unit), kUnits[u]);
  return text;
}

}  // namespace artel::launch
