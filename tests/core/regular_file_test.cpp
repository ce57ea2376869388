// check_regular_file / read_regular_file: a user's file is read only when it
// is a regular file; anything else is one line naming what it was for.
#include "artel/core/regular_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "artel/core/error.h"

namespace artel {
namespace {

namespace fs = std::filesystem;

std::string refusal(const std::string& path) {
  try {
    read_regular_file(path, "token table", "pass the table");
  } catch (const Error& e) {
    return e.what();
  }
  return "read";
}

TEST(RegularFile, ReadsAFileAndRefusesWhatIsNoneInOneLine) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("regular_file_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "t.bin", std::ios::binary) << std::string("a\0b", 3);
  EXPECT_EQ(read_regular_file((dir / "t.bin").string(), "token table"), std::string("a\0b", 3));
  const std::string fifo = (dir / "fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(refusal((dir / "none").string()), "token table " + (dir / "none").string() + " does not exist (hint: pass the table)");
  EXPECT_EQ(refusal(dir.string()), "token table " + dir.string() + " is a directory, not a file (hint: pass the table)");
  // Read whole, /dev/zero would fill memory and a FIFO would never end.
  EXPECT_EQ(refusal("/dev/zero"), "token table /dev/zero is not a regular file (hint: pass the table)");
  EXPECT_EQ(refusal(fifo), "token table " + fifo + " is not a regular file (hint: pass the table)");
  EXPECT_EQ(refusal(""), "token table: the path is empty (hint: pass the table)");
  fs::remove_all(dir);
}

// An output renamed over its path replaced a device or a FIFO with a file
// (as root, `artel export W /dev/full` did): refused; a link is followed to
// the file it names, and stays.
TEST(RegularFile, AnOutputReplacesOnlyARegularFile) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("replaceable_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string fifo = (dir / "fifo").string(), file = (dir / "w.safetensors").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto said = [](const std::string& path) {
    try {
      return replaceable_file(path, "weights file");
    } catch (const Error& e) {
      return std::string(e.what());
    }
  };
  EXPECT_EQ(said("/dev/null"), "weights file /dev/null is a device, a FIFO or a socket, not a regular file (hint: "
                               "name a regular file: it is written beside and renamed over, which would replace what is "
                               "there)");
  EXPECT_NE(said(fifo).find("weights file " + fifo + " is a device, a FIFO or a socket"), std::string::npos);
  EXPECT_NE(said(dir.string()).find("is a directory, not a file"), std::string::npos);
  EXPECT_EQ(said(file), file);  // not there yet: made
  fs::create_symlink("w.safetensors", dir / "link");
  fs::create_symlink(dir / "link", dir / "link2");
  EXPECT_EQ(said((dir / "link2").string()), file);  // through both links
  fs::create_symlink("/dev/null", dir / "to_null");
  EXPECT_NE(said((dir / "to_null").string()).find("is a device, a FIFO or a socket"), std::string::npos);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace artel
