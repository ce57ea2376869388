// One way for every subcommand to read its flags with CLI11: --help prints
// the help and ends the command successfully; a bad flag is an artel::Error
// (one line, with a hint), like every other bad input.
//
//   CLI::App app{"...", "artel train"};
//   if (!parse_flags(app, argc, argv, "see `artel train --help`")) return 0;   // --help was printed
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace artel::cli {

// False when --help was asked for (and printed to stdout).
bool parse_flags(CLI::App& app, int argc, char** argv, const std::string& hint);

// Checks for a number flag, failing as "--flag: must be > 0, got 0":
// CLI11's PositiveNumber and NonNegativeNumber name their range as 0 to the
// largest double, written out in 309 digits. Both refuse nan and inf.
//
//   app.add_option("--temperature", t, "...")->check(positive());
CLI::Validator positive();
CLI::Validator non_negative();

}  // namespace artel::cli
