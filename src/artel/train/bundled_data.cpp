#include "artel/train/bundled_data.h"

#include <filesystem>
#include <vector>

#include "artel/core/error.h"

namespace artel::train {

namespace fs = std::filesystem;

namespace {

// The executable's folder and the working directory, each with up to four
// parents: covers ./build/artel, build-x/tests/..., and running from a subfolder.
std::vector<fs::path> search_roots() {
  std::vector<fs::path> roots;
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  for (fs::path start : {ec ? fs::path() : exe.parent_path(), fs::current_path(ec)}) {
    for (int up = 0; up < 5 && !start.empty(); ++up) {
      roots.push_back(start);
      if (start == start.parent_path()) break;
      start = start.parent_path();
    }
  }
  return roots;
}

}  // namespace

std::string find_bundled_data(const std::string& name) {
  std::error_code ec;
  for (const fs::path& root : search_roots()) {
    fs::path p = root / "data" / name;
    if (fs::exists(p, ec)) return p.lexically_normal().string();
  }
  throw Error("cannot find the bundled data/" + name + " above the program or the working directory",
              "run from the artel checkout or pass --data PATH");
}

std::string project_root() {
  fs::path data = find_bundled_data("tinyshakespeare.txt");
  return data.parent_path().parent_path().string();
}

std::string default_data_for(const std::string& model) {
  return find_bundled_data(model == "gpt" ? "tinyshakespeare.txt" : "mnist-t10k");
}

}  // namespace artel::train
