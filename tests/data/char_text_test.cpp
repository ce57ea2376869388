#include "artel/data/char_text.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "error_of.h"
#include "data/temp_files.h"

namespace artel::data {
namespace {

using ::testing::HasSubstr;
using namespace artel::data::testing;
using test_support::error_of;

TEST(CharText, TinyShakespeareVocabularyAndSplit) {
  CharText t = load_char_text(std::string(ARTEL_SOURCE_DIR) + "/data/tinyshakespeare.txt");
  EXPECT_EQ(t.vocab.size(), 65);
  EXPECT_EQ(t.vocab.chars().substr(0, 3), "\n !");  // sorted bytes: newline, space, '!'
  EXPECT_EQ(t.train.size(), 1003854u);              // int(0.9 * 1115394)
  EXPECT_EQ(t.val.size(), 1115394u - 1003854u);
  std::vector<int64_t> first(t.train.begin(), t.train.begin() + 14);
  EXPECT_EQ(t.vocab.decode(first), "First Citizen:");
  EXPECT_EQ(t.vocab.id('\n'), 0);
  EXPECT_EQ(t.vocab.id(' '), 1);
}

TEST(CharText, EncodeDecodeRoundTrip) {
  CharVocab v = CharVocab::from_text("hello world");
  EXPECT_EQ(v.chars(), " dehlorw");
  std::vector<int64_t> ids = v.encode("hello");
  EXPECT_EQ(ids, (std::vector<int64_t>{3, 2, 4, 4, 5}));
  EXPECT_EQ(v.decode(ids), "hello");
  EXPECT_THAT(error_of([&] { v.encode("hex"); }), HasSubstr("not in the 8-character vocabulary"));
  std::vector<int64_t> bad{8};
  EXPECT_THAT(error_of([&] { v.decode(bad); }), HasSubstr("token id 8 is outside"));
}

TEST(CharText, SplitIsIntOfNineTenths) {
  for (size_t n : {1u, 9u, 10u, 11u, 19u, 101u, 12345u}) {
    CharText t = make_char_text(std::string(n, 'a'));
    EXPECT_EQ(t.train.size(), static_cast<size_t>(0.9 * static_cast<double>(n))) << n;
    EXPECT_EQ(t.train.size() + t.val.size(), n);
  }
}

TEST(CharText, BytesAreTokens) {
  std::string s = "a\xff\x01" "a";
  CharText t = make_char_text(s);
  EXPECT_EQ(t.vocab.size(), 3);
  EXPECT_EQ(t.vocab.chars(), std::string("\x01" "a\xff"));
}

TEST(CharText, EmptyAndMissingFilesAreErrors) {
  TempDir dir;
  write_raw(dir.file("empty.txt"), {});
  EXPECT_THAT(error_of([&] { load_char_text(dir.file("empty.txt")); }), HasSubstr("empty.txt is empty"));
  EXPECT_THAT(error_of([&] { load_char_text(dir.file("gone.txt")); }), HasSubstr("gone.txt does not exist"));
}

TEST(CharText, GzipTextIsRead) {
  TempDir dir;
  write_gz(dir.file("t.txt.gz"), {'a', 'b', 'c', 'a'});
  CharText t = load_char_text(dir.file("t.txt.gz"));
  EXPECT_EQ(t.vocab.chars(), "abc");
  EXPECT_EQ(t.train.size(), 3u);
}

}  // namespace
}  // namespace artel::data
