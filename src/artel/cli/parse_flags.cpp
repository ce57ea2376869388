#include "artel/cli/parse_flags.h"

#include <cmath>
#include <iostream>

#include "artel/core/error.h"

namespace artel::cli {

bool parse_flags(CLI::App& app, int argc, char** argv, const std::string& hint) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return false;
  } catch (const CLI::ParseError& e) {
    throw Error(e.what(), hint);
  }
  return true;
}

namespace {

CLI::Validator number_check(bool zero_allowed) {
  const std::string bound = zero_allowed ? ">= 0" : "> 0";
  return CLI::Validator(
      [zero_allowed, bound](std::string& text) -> std::string {
        double v = 0;
        if (!CLI::detail::lexical_cast(text, v) || !std::isfinite(v)) return "must be a finite number, got " + text;
        if (v > 0 || (zero_allowed && v == 0)) return "";
        return "must be " + bound + ", got " + text;
      },
      "NUMBER " + bound);
}

}  // namespace

CLI::Validator positive() { return number_check(false); }
CLI::Validator non_negative() { return number_check(true); }

}  // namespace artel::cli
