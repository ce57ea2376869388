#include "artel/core/json_file.h"

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

}  // namespace artel
