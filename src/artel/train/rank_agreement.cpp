#include "artel/train/rank_agreement.h"

#include <filesystem>

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
  for (const auto& [key, v] : root.items()) {
    if (key == "file sizes") continue;
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

}  // namespace artel::train
