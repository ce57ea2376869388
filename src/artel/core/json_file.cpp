#include "artel/core/json_file.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <set>
#include <vector>

#include "artel/core/error.h"
#include "artel/core/regular_file.h"

namespace artel {

std::string printable(const std::string& text) {
  std::string out;
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c < 0x7f) {
      out += ch;
    } else {
      char hex[5];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    }
  }
  return out;
}

nlohmann::json read_json_file(const std::string& path, const std::string& what, const std::string& open_hint,
                              const std::string& format_hint) {
  check_file_path(path, what, open_hint);
  std::ifstream in(path);  // streamed: a pipe reads, and a device such as /dev/zero stops at its first byte
  if (!in) throw Error("cannot open " + what + " " + path, open_hint);
  // A key given twice in one object: nlohmann keeps the last, as Python
  // does, so a setting written twice (one of them forgotten) silently
  // overrode the other. Each open object's keys are kept while it is parsed.
  std::vector<std::set<std::string>> keys;
  auto refuse_repeated_keys = [&](int, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    if (event == Event::object_start) keys.emplace_back();
    if (event == Event::object_end && !keys.empty()) keys.pop_back();
    if (event == Event::key && !keys.empty() && !keys.back().insert(parsed.get<std::string>()).second)
      throw Error(what + " " + path + " gives the key \"" + printable(parsed.get<std::string>()) +
                      "\" twice in one object, and only one can hold",
                  "remove the one that is not meant");
    return true;
  };
  try {
    return nlohmann::json::parse(in, refuse_repeated_keys);
  } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range for a number such as 1e999
    // Without the library's tag ("[json.exception.parse_error.101] "): the
    // position and the reason are what the user can act on.
    std::string why = e.what();
    if (const size_t tag = why.find("] "); why.rfind("[json.exception.", 0) == 0 && tag != std::string::npos)
      why.erase(0, tag + 2);
    throw Error(what + " " + path + " is not valid JSON: " + printable(why), format_hint);
  }
}

namespace {

// A value as an error quotes it: its JSON, cut to a line's worth.
std::string quoted(const nlohmann::json& v) {
  std::string text = printable(v.dump());
  return text.size() > 40 ? text.substr(0, 37) + "..." : text;
}

// obj[key] when obj holds it and `is_type` says it has the wanted type; null
// where it is absent; an Error naming the place otherwise.
const nlohmann::json* member(const nlohmann::json& obj, const char* key, bool (nlohmann::json::*is_type)() const,
                             const char* type, const std::string& where) {
  if (!obj.is_object() || !obj.contains(key)) return nullptr;
  const nlohmann::json& v = obj[key];
  if (!(v.*is_type)())
    throw Error(where + ": \"" + key + "\" must be " + type + ", got " + v.type_name() + " " + quoted(v));
  return &v;
}

}  // namespace

std::string json_string_or(const nlohmann::json& obj, const char* key, const std::string& fallback,
                           const std::string& where) {
  const nlohmann::json* v = member(obj, key, &nlohmann::json::is_string, "a string", where);
  return v ? v->get<std::string>() : fallback;
}

double json_number_or(const nlohmann::json& obj, const char* key, double fallback, const std::string& where) {
  const nlohmann::json* v = member(obj, key, &nlohmann::json::is_number, "a number", where);
  return v ? v->get<double>() : fallback;
}

int64_t json_integer_or(const nlohmann::json& obj, const char* key, int64_t fallback, const std::string& where) {
  const nlohmann::json* v = member(obj, key, &nlohmann::json::is_number, "a whole number", where);
  if (!v) return fallback;
  if (v->is_number_integer() && !(v->is_number_unsigned() && v->get<uint64_t>() > uint64_t{INT64_MAX}))
    return v->get<int64_t>();
  // 2^63 is the first double past int64 (INT64_MAX itself does not convert exactly).
  const double d = v->get<double>();
  if (v->is_number_float() && d == std::floor(d) && std::abs(d) < 9.2233720368547758e18) return static_cast<int64_t>(d);
  throw Error(where + ": \"" + key + "\" must be a whole number, got " + quoted(*v));
}

void check_json_keys(const nlohmann::json& obj, std::initializer_list<std::string_view> known,
                     const std::string& where, const std::string& format_hint) {
  for (const auto& [key, value] : obj.items()) {
    if (std::find(known.begin(), known.end(), key) != known.end()) continue;
    std::string names;
    for (std::string_view k : known) names.append(names.empty() ? "" : ", ").append(k);
    throw Error(where + ": unknown key \"" + printable(key) + "\"", "the keys are " + names + " (" + format_hint + ")");
  }
}

}  // namespace artel
