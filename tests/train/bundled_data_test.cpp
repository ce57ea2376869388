// Where the bundled data is found: an installed prefix (P/bin/artel,
// P/share/artel/data) and a checkout (./build/artel next to ./data).
#include "artel/train/bundled_data.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "artel/core/error.h"
#include "data/temp_files.h"

namespace artel::train {
namespace {

namespace fs = std::filesystem;
using data::testing::TempDir;

void touch(const fs::path& p) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << "x";
}

TEST(BundledData, AnInstalledPrefixIsSearchedFirst) {
  std::vector<std::string> roots = bundled_data_roots("/opt/artel/bin", "/home/me/work");
  ASSERT_GE(roots.size(), 3u);
  EXPECT_EQ(roots[0], "/opt/artel/share/artel");
  EXPECT_EQ(roots[1], "/opt/artel/bin");
  EXPECT_EQ(roots[2], "/opt/artel");
  EXPECT_NE(std::find(roots.begin(), roots.end(), "/home/me/work"), roots.end());
}

TEST(BundledData, FoundInAnInstalledPrefix) {
  TempDir prefix;
  fs::path p = prefix.str();
  touch(p / "bin" / "artel");
  touch(p / "share" / "artel" / "data" / "tinyshakespeare.txt");
  auto roots = bundled_data_roots((p / "bin").string(), "/");
  EXPECT_EQ(find_bundled_data("tinyshakespeare.txt", roots), (p / "share/artel/data/tinyshakespeare.txt").string());
  // Helpers installed beside data/ are found from the root (share/artel/tools/...).
  EXPECT_EQ(project_root(roots), (p / "share" / "artel").string());
}

TEST(BundledData, FoundAboveTheProgramInACheckout) {
  TempDir checkout;
  fs::path c = checkout.str();
  touch(c / "build" / "artel");
  touch(c / "data" / "tinyshakespeare.txt");
  fs::create_directories(c / "data" / "mnist-t10k");
  auto roots = bundled_data_roots((c / "build").string(), "/");
  EXPECT_EQ(find_bundled_data("mnist-t10k", roots), (c / "data" / "mnist-t10k").string());
  EXPECT_EQ(project_root(roots), c.string());
}

TEST(BundledData, MissingDataNamesTheFixInTheError) {
  TempDir empty;
  try {
    find_bundled_data("tinyshakespeare.txt", bundled_data_roots(empty.str(), ""));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot find the bundled data/tinyshakespeare.txt"), std::string::npos);
    EXPECT_EQ(e.hint(), "run from the artel checkout or pass --data PATH");
  }
}

}  // namespace
}  // namespace artel::train
