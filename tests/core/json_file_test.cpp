// read_json_file: the document, or one printable line naming the file.
#include "artel/core/json_file.h"

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "artel/core/error.h"
#include "temp_dir.h"

namespace artel {
namespace {

namespace fs = std::filesystem;

std::string error_of(const std::string& path) {
  try {
    read_json_file(path, "cluster file", "check --cluster", "see the format");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(JsonFile, ReadsADocumentAndNamesTheFileWhenItCannot) {
  const test_support::TempDir scratch;
  const fs::path& dir = scratch.path();
  std::ofstream(dir / "good.json") << R"({"hosts": 2})";
  EXPECT_EQ(read_json_file((dir / "good.json").string(), "cluster file", "")["hosts"], 2);
  EXPECT_EQ(error_of((dir / "none.json").string()),
            "cluster file " + (dir / "none.json").string() + " does not exist (hint: check --cluster)");
  // A number beyond a double is nlohmann's out_of_range, not a parse error: named the same way.
  std::ofstream(dir / "huge.json") << R"({"hosts": 1e999})";
  EXPECT_EQ(error_of((dir / "huge.json").string()).rfind("cluster file " + (dir / "huge.json").string() +
                                                          " is not valid JSON: ", 0),
            0u);
  // A binary file: nlohmann quotes the byte it read last; the message keeps it printable.
  std::ofstream(dir / "binary.json", std::ios::binary) << std::string("\xff\xfe\x01", 3);
  const std::string e = error_of((dir / "binary.json").string());
  EXPECT_NE(e.find("cluster file " + (dir / "binary.json").string() + " is not valid JSON"), std::string::npos) << e;
  EXPECT_NE(e.find("\\xff"), std::string::npos) << e;
  EXPECT_EQ(e.find("json.exception"), std::string::npos) << e;  // the library's tag is not the user's business
  std::ofstream(dir / "cut.json") << R"({"hosts": 2,)";
  EXPECT_NE(error_of((dir / "cut.json").string()).find(" is not valid JSON: parse error at line 1, column 13"),
            std::string::npos)
      << error_of((dir / "cut.json").string());
  for (const char c : e) EXPECT_TRUE(c >= 0x20 && c < 0x7f) << static_cast<int>(static_cast<unsigned char>(c));
  EXPECT_NE(e.find("(hint: see the format)"), std::string::npos) << e;
}

// A config from bash's <(...) is a pipe: read, as it always was; a device
// such as /dev/zero stops the parser at its first byte.
TEST(JsonFile, ReadsAPipeAndStopsAtADevicesFirstByte) {
  const fs::path fifo = fs::path(::testing::TempDir()) / ("json_fifo_" + std::to_string(::getpid()));
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::thread writer([&] { std::ofstream(fifo) << R"({"steps": 3})"; });
  EXPECT_EQ(read_json_file(fifo.string(), "config file", "")["steps"], 3);
  writer.join();
  fs::remove(fifo);
  EXPECT_NE(error_of("/dev/zero").find("cluster file /dev/zero is not valid JSON"), std::string::npos);
  EXPECT_NE(error_of(::testing::TempDir()).find("is a directory, not a file"), std::string::npos);
}

// A key given twice in one object is refused (nlohmann, like Python, kept
// the last); the same key in different objects is not a repeat.
TEST(JsonFile, AKeyGivenTwiceInOneObjectIsRefused) {
  const test_support::TempDir scratch;
  const fs::path& dir = scratch.path();
  std::ofstream(dir / "twice.json") << R"({"lr": 0.1, "steps": 3, "lr": 0.01})";
  EXPECT_EQ(error_of((dir / "twice.json").string()),
            "cluster file " + (dir / "twice.json").string() +
                " gives the key \"lr\" twice in one object, and only one can hold (hint: remove the one that is not "
                "meant)");
  std::ofstream(dir / "nested.json") << R"({"a": {"x": 1, "y": {"x": 2}}, "b": [{"x": 3}, {"x": 4}], "x": 5})";
  const nlohmann::json j = read_json_file((dir / "nested.json").string(), "cluster file", "");
  EXPECT_EQ(j["b"][1]["x"], 4);
  EXPECT_EQ(j["x"], 5);
  std::ofstream(dir / "deep.json") << R"({"a": [{"x": 1}], "b": {"c": {"x": 1, "x": 2}}})";
  EXPECT_NE(error_of((dir / "deep.json").string()).find("gives the key \"x\" twice"), std::string::npos);
}

TEST(JsonFile, PrintableEscapesEveryByteOutsidePrintableAscii) {
  EXPECT_EQ(printable("a b~"), "a b~");
  EXPECT_EQ(printable(std::string("\n\x7f\x80", 3)), "\\x0a\\x7f\\x80");
}

}  // namespace
}  // namespace artel
