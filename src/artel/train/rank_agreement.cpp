#include "artel/train/rank_agreement.h"

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "artel/comm/gather_strings.h"
#include "artel/core/error.h"

namespace artel::train {

namespace {

namespace fs = std::filesystem;

// Keys whose value may differ by host; of the paths among them, the files'
// sizes are compared instead.
constexpr const char* kPerHost[] = {"threads", "out", "trace", "data", "val_data", "init"};
constexpr const char* kFiles[] = {"data", "val_data", "init"};

// What a path holds, as the end of a sentence: "holds 1234 bytes" (a
// directory, such as MNIST's: the sum of its files), or "is missing".
std::string contents(const std::string& path) {
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) return "holds " + std::to_string(fs::file_size(path, ec)) + " bytes";
  if (!fs::is_directory(path, ec)) return "is missing";
  uintmax_t bytes = 0;
  for (const fs::directory_entry& e : fs::directory_iterator(path, ec))
    if (e.is_regular_file(ec)) bytes += e.file_size(ec);
  return "holds " + std::to_string(bytes) + " bytes";
}

nlohmann::json what_must_agree(const TrainConfig& cfg) {
  nlohmann::json j = cfg.to_json();
  nlohmann::json sizes = nlohmann::json::object();
  for (const char* key : kFiles)
    if (const std::string path = j[key].get<std::string>(); !path.empty()) sizes[key] = contents(path);
  for (const char* key : kPerHost) j.erase(key);
  j["file sizes"] = sizes;
  return j;
}

// The first key whose value differs, as a line; "" when none does.
std::string first_difference(const nlohmann::json& mine, const nlohmann::json& root, int rank) {
  const std::string r = "rank " + std::to_string(rank);
  // The model and preset first: the other keys' defaults follow from them, so
  // a rank started with another --model differs first in, say, its batch size.
  std::vector<std::string> keys{"model", "preset"};
  for (const auto& [key, v] : root.items())
    if (key != "model" && key != "preset" && key != "file sizes") keys.push_back(key);
  for (const std::string& key : keys) {
    if (!root.contains(key)) continue;
    const nlohmann::json& v = root[key];
    const nlohmann::json other = mine.contains(key) ? mine[key] : nlohmann::json();
    if (other == v) continue;
    auto shown = [](const nlohmann::json& x) { return x.is_string() ? "'" + x.get<std::string>() + "'" : x.dump(); };
    return r + " was started with " + flag_of(key) + " " + shown(other) + ", rank 0 with " + flag_of(key) + " " + shown(v);
  }
  const nlohmann::json& a = mine["file sizes"];
  const nlohmann::json& b = root["file sizes"];
  for (const char* key : kFiles) {
    const std::string x = a.value(key, "is not given"), y = b.value(key, "is not given");
    if (x != y) return r + "'s " + flag_of(key) + " " + x + ", rank 0's " + y;
  }
  return "";
}

}  // namespace

void check_ranks_agree(comm::ProcessGroup& world, const TrainConfig& cfg) {
  const std::vector<std::string> all = comm::all_gather_strings(
      world, what_must_agree(cfg).dump(), {.max_bytes = int64_t{1} << 20, .what = "configuration"});
  const nlohmann::json root = nlohmann::json::parse(all.front());
  for (size_t r = 1; r < all.size(); ++r)
    if (std::string why = first_difference(nlohmann::json::parse(all[r]), root, static_cast<int>(r)); !why.empty())
      throw Error(why, "start every rank with the same flags, config file and data (mpirun runs each rank's own)");
}

namespace {

// A rank's listing: its directory, then its checkpoints' names, a line each.
struct Listing {
  std::string dir;
  std::vector<std::string> names;
};

std::string encode(const std::string& dir, const std::vector<std::string>& paths) {
  std::string text = dir;
  for (const std::string& p : paths) text += "\n" + fs::path(p).filename().string();
  return text;
}

Listing decode(const std::string& text) {
  Listing l;
  std::istringstream in(text);
  std::getline(in, l.dir);
  for (std::string name; std::getline(in, name);) l.names.push_back(name);
  return l;
}

bool lists(const Listing& l, const std::string& name) {
  return std::find(l.names.begin(), l.names.end(), name) != l.names.end();
}

std::string seen(const Listing& l) {
  if (l.names.empty()) return "sees none in " + l.dir;
  return "sees " + std::to_string(l.names.size()) + " (the newest " + l.names.front() + ") in " + l.dir;
}

}  // namespace

std::vector<std::string> checkpoints_every_rank_sees(comm::ProcessGroup& world, const std::vector<std::string>& mine,
                                                     const std::string& dir,
                                                     const std::function<void(const std::string&)>& warn) {
  std::vector<Listing> all;
  for (const std::string& text :
       comm::all_gather_strings(world, encode(dir, mine), {.max_bytes = int64_t{1} << 24, .what = "checkpoint list"}))
    all.push_back(decode(text));
  // Rank 0's order, kept where every rank lists the name; the same on every rank.
  std::vector<std::string> common;
  for (const std::string& name : all.front().names)
    if (std::all_of(all.begin(), all.end(), [&](const Listing& l) { return lists(l, name); })) common.push_back(name);
  // Rank `lacking`, the first without the name, as a sentence's end.
  auto lacking = [&](const std::string& name) {
    const auto l = std::find_if(all.begin(), all.end(), [&](const Listing& x) { return !lists(x, name); });
    return "rank " + std::to_string(l - all.begin()) + " " + seen(*l);
  };
  const auto some = std::find_if(all.begin(), all.end(), [](const Listing& l) { return !l.names.empty(); });
  if (common.empty() && some != all.end())
    throw Error("no checkpoint is seen by every rank: rank " + std::to_string(some - all.begin()) + " " + seen(*some) +
                    ", " + lacking(some->names.front()),
                "every rank must read the checkpoints where they were written (the same --out, on a filesystem "
                "every host shares); to start afresh, leave out --resume or give another --out");
  std::vector<std::string> told = common;  // each name left out is told once
  for (size_t r = 0; r < all.size(); ++r)
    for (const std::string& name : all[r].names)
      if (std::find(told.begin(), told.end(), name) == told.end()) {
        told.push_back(name);
        warn("skipping checkpoint " + name + " of rank " + std::to_string(r) + ": " + lacking(name));
      }
  std::vector<std::string> out;
  for (const std::string& name : common)
    for (const std::string& p : mine)
      if (fs::path(p).filename().string() == name) out.push_back(p);
  return out;
}

}  // namespace artel::train
