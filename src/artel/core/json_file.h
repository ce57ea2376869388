// A JSON file a user hands a command (a config, a cluster file, a model's
// costs): the document, or one Error that names the file and says what is
// wrong in printable text. nlohmann's parse message quotes the bytes it read
// last, raw: a binary file passed by mistake would put them on the terminal.
//
//   nlohmann::json j = read_json_file(path, "cluster file", "check the path passed to --cluster",
//                                     "see docs/PLAN.md for the cluster format");
#pragma once

#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace artel {

// Errors: check_file_path's (open_hint; a pipe such as <(...) is read),
// "WHAT PATH is not valid JSON: ..." (format_hint).
nlohmann::json read_json_file(const std::string& path, const std::string& what, const std::string& open_hint,
                              const std::string& format_hint = "");

// `text` with every byte outside printable ASCII written as \xNN.
std::string printable(const std::string& text);

// A member of a user's JSON object, or `fallback` where the object lacks it.
// A member of another type is an Error naming `where` and the key
// ("cluster.json: device: \"name\" must be a string, got number"), not
// nlohmann's "[json.exception.type_error.302] type must be string".
std::string json_string_or(const nlohmann::json& obj, const char* key, const std::string& fallback,
                           const std::string& where);
double json_number_or(const nlohmann::json& obj, const char* key, double fallback, const std::string& where);
// A whole number within int64: 1.5 and 1e30 are refused, not truncated.
int64_t json_integer_or(const nlohmann::json& obj, const char* key, int64_t fallback, const std::string& where);

// Refuses a key of object `obj` that is not `known`: a typing slip
// ("worker_per_host") would otherwise leave a setting silently at its default.
void check_json_keys(const nlohmann::json& obj, std::initializer_list<std::string_view> known,
                     const std::string& where, const std::string& format_hint);

}  // namespace artel
