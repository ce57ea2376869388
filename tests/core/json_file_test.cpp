// read_json_file: the document, or one printable line naming the file.
#include "artel/core/json_file.h"

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <fstream>
#include <thread>

#include "artel/core/error.h"
#include "error_of.h"
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

// A member of the wrong type names the place and the key, where nlohmann
// would say "[json.exception.type_error.302] type must be string".
TEST(JsonFile, AFieldIsItsValueItsFallbackOrAnErrorNamingIt) {
  const nlohmann::json j = nlohmann::json::parse(
      R"({"name": "a", "count": 3, "big": 1e3, "half": 1.5, "huge": 1e30, "list": [1, 2], "top": 9223372036854775808})");
  EXPECT_EQ(json_string_or(j, "name", "x", "f.json"), "a");
  EXPECT_EQ(json_string_or(j, "absent", "x", "f.json"), "x");
  EXPECT_EQ(json_integer_or(j, "count", 0, "f.json"), 3);
  EXPECT_EQ(json_integer_or(j, "big", 0, "f.json"), 1000);  // a whole number written as a float
  EXPECT_EQ(json_integer_or(j, "absent", -1, "f.json"), -1);
  EXPECT_EQ(json_number_or(j, "half", 0, "f.json"), 1.5);
  EXPECT_EQ(test_support::error_of([&] { json_string_or(j, "count", "", "f.json: device"); }),
            "f.json: device: \"count\" must be a string, got number 3");
  EXPECT_EQ(test_support::error_of([&] { json_number_or(j, "list", 0, "f.json"); }), "f.json: \"list\" must be a number, got array [1,2]");
  for (const char* key : {"half", "huge", "top"})  // not truncated, nor wrapped past int64
    EXPECT_NE(test_support::error_of([&] { json_integer_or(j, key, 0, "f.json"); }).find("must be a whole number"), std::string::npos)
        << key;
}

TEST(JsonFile, AnUnknownKeyIsRefusedWithTheKnownOnes) {
  const nlohmann::json j = nlohmann::json::parse(R"({"name": "a", "nmae": "b"})");
  check_json_keys(j, {"name", "nmae"}, "f.json", "docs/X.md");
  EXPECT_EQ(test_support::error_of([&] { check_json_keys(j, {"name", "layers"}, "f.json", "docs/X.md"); }),
            "f.json: unknown key \"nmae\" (hint: the keys are name, layers (docs/X.md))");
}

}  // namespace
}  // namespace artel
