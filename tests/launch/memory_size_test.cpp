#include "artel/launch/memory_size.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "artel/core/error.h"

namespace artel::launch {
namespace {

using ::testing::HasSubstr;

TEST(MemorySize, ParsesBinaryUnitsAndBytes) {
  EXPECT_EQ(parse_memory_size("3G"), 3LL << 30);
  EXPECT_EQ(parse_memory_size("3GiB"), 3LL << 30);
  EXPECT_EQ(parse_memory_size("3g"), 3LL << 30);  // docker's spelling
  EXPECT_EQ(parse_memory_size("512M"), 512LL << 20);
  EXPECT_EQ(parse_memory_size("512MiB"), 512LL << 20);
  EXPECT_EQ(parse_memory_size("64K"), 64LL << 10);
  EXPECT_EQ(parse_memory_size("2T"), 2LL << 40);
  EXPECT_EQ(parse_memory_size("1500000000"), 1500000000LL);
  EXPECT_EQ(parse_memory_size("1.5G"), 3LL << 29);
}

std::string error_of(const std::string& text) {
  try {
    parse_memory_size(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(MemorySize, RejectsWhatIsNotASize) {
  for (const char* bad : {"", "G", "-1G", "+3G", "0", "0.5", "3X", "3 G", "3Gb", "3GiBs", "1e9", "inf", "nan",
                          "99999999T"}) {
    std::string e = error_of(bad);
    EXPECT_THAT(e, HasSubstr("is not a memory size")) << bad;
    EXPECT_THAT(e, HasSubstr("hint: ")) << bad;
    EXPECT_EQ(e.find('\n'), std::string::npos) << "one line: " << e;
  }
}

TEST(MemorySize, SaysThatGbIsAmbiguous) {
  EXPECT_THAT(error_of("3GB"), HasSubstr("could mean 10^9 or 2^30 bytes; write G or GiB"));
  EXPECT_THAT(error_of("512MB"), HasSubstr("could mean 10^6 or 2^20 bytes; write M or MiB"));
}

TEST(MemorySize, FormatsInTheLargestWholeUnit) {
  EXPECT_EQ(format_memory_size(3LL << 30), "3 GiB");
  EXPECT_EQ(format_memory_size(200LL << 20), "200 MiB");
  EXPECT_EQ(format_memory_size(3LL << 29), "1.50 GiB");
  EXPECT_EQ(format_memory_size(1500000000), "1.40 GiB");
  EXPECT_EQ(format_memory_size(4096), "4 KiB");
  EXPECT_EQ(format_memory_size(100), "100 bytes");
}

}  // namespace
}  // namespace artel::launch
