#include "artel/cli/parse_flags.h"

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

}  // namespace artel::cli
