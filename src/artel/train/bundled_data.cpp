#include "artel/train/bundled_data.h"

#include <filesystem>

#include "artel/core/error.h"
#include "artel/models/model.h"

namespace artel::train {

namespace fs = std::filesystem;

namespace {

// The running program's folder and the working directory.
std::vector<std::string> default_roots() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  std::string exe_dir = ec ? "" : exe.parent_path().string();
  fs::path cwd = fs::current_path(ec);
  return bundled_data_roots(exe_dir, ec ? "" : cwd.string());
}

}  // namespace

std::vector<std::string> bundled_data_roots(const std::string& exe_dir, const std::string& cwd) {
  std::vector<std::string> roots;
  // Installed: P/bin/artel, P/share/artel/data (cmake/install.cmake).
  if (!exe_dir.empty()) roots.push_back((fs::path(exe_dir).parent_path() / "share" / "artel").string());
  // A checkout: ./build/artel, build-x/tests/..., or run from a subfolder.
  for (fs::path start : {fs::path(exe_dir), fs::path(cwd)}) {
    for (int up = 0; up < 5 && !start.empty(); ++up) {
      roots.push_back(start.string());
      if (start == start.parent_path()) break;
      start = start.parent_path();
    }
  }
  return roots;
}

std::string find_bundled_data(const std::string& name, const std::vector<std::string>& roots) {
  std::error_code ec;
  for (const std::string& root : roots) {
    fs::path p = fs::path(root) / "data" / name;
    if (fs::exists(p, ec)) return p.lexically_normal().string();
  }
  throw Error("cannot find the bundled data/" + name + " above the program or the working directory, nor in "
              "the installed <prefix>/share/artel",
              "run from the artel checkout or pass --data PATH");
}

std::string find_bundled_data(const std::string& name) { return find_bundled_data(name, default_roots()); }

std::string project_root(const std::vector<std::string>& roots) {
  fs::path data = find_bundled_data("tinyshakespeare.txt", roots);
  return data.parent_path().parent_path().string();
}

std::string project_root() { return project_root(default_roots()); }

std::string default_data_for(const std::string& model) {
  return find_bundled_data(models::trains_on_text(model) ? "tinyshakespeare.txt" : "mnist-t10k");
}

}  // namespace artel::train
