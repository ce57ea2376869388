// A JSON file a user hands a command (a config, a cluster file, a model's
// costs): the document, or one Error that names the file and says what is
// wrong in printable text. nlohmann's parse message quotes the bytes it read
// last, raw: a binary file passed by mistake would put them on the terminal.
//
//   nlohmann::json j = read_json_file(path, "cluster file", "check the path passed to --cluster",
//                                     "see docs/PLAN.md for the cluster format");
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace artel {

// Errors: check_file_path's (open_hint; a pipe such as <(...) is read),
// "WHAT PATH is not valid JSON: ..." (format_hint).
nlohmann::json read_json_file(const std::string& path, const std::string& what, const std::string& open_hint,
                              const std::string& format_hint = "");

// `text` with every byte outside printable ASCII written as \xNN.
std::string printable(const std::string& text);

}  // namespace artel
