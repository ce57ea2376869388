// Token files in both layouts (nanoGPT's raw uint16, llm.c's with a header),
// as a dataset of token blocks, and every damaged file refused in one line.
#include "artel/data/token_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "artel/data/dataset.h"
#include "artel/data/token_table.h"
#include "error_of.h"
#include "data/temp_files.h"

namespace artel::data {
namespace {

using ::testing::HasSubstr;
using namespace artel::data::testing;
using test_support::error_of;

std::vector<uint8_t> raw_ids(const std::vector<uint16_t>& ids) {
  std::vector<uint8_t> b(ids.size() * 2);
  std::memcpy(b.data(), ids.data(), b.size());
  return b;
}

std::vector<uint8_t> llmc(const std::vector<uint16_t>& ids, int32_t magic = kLlmcMagic, int32_t version = 1,
                          int64_t count = -1) {
  std::vector<int32_t> header(256, 0);
  header[0] = magic, header[1] = version, header[2] = static_cast<int32_t>(count < 0 ? ids.size() : count);
  std::vector<uint8_t> b(1024);
  std::memcpy(b.data(), header.data(), 1024);
  std::vector<uint8_t> body = raw_ids(ids);
  b.insert(b.end(), body.begin(), body.end());
  return b;
}

std::vector<uint16_t> counting(int n, int mod) {
  std::vector<uint16_t> ids;
  for (int i = 0; i < n; ++i) ids.push_back(static_cast<uint16_t>(i % mod));
  return ids;
}

TEST(TokenFile, ReadsNanoGptAndLlmcLayoutsInPlace) {
  TempDir dir;
  write_raw(dir.file("train.bin"), raw_ids(counting(1000, 50000)));
  write_raw(dir.file("llmc_train.bin"), llmc(counting(1000, 50000)));
  TokenFile a = open_token_file(dir.file("train.bin"), 50257);
  TokenFile b = open_token_file(dir.file("llmc_train.bin"), 50257);
  EXPECT_EQ(a.layout, "nanoGPT");
  EXPECT_EQ(b.layout, "llm.c");
  ASSERT_EQ(a.tokens.size(), 1000);
  ASSERT_EQ(b.tokens.size(), 1000);
  for (int64_t i = 0; i < 1000; i += 37) EXPECT_EQ(a.tokens[i], b.tokens[i]);
  EXPECT_EQ(b.tokens[999], 999);
}

// A file cut short while mapped: the read past its new end raised SIGBUS,
// and the run died as a bare "Bus error". Now one line names the file.
TEST(TokenFileDeathTest, AFileCutShortWhileMappedIsNamed) {
  ::testing::FLAGS_gtest_death_test_style = "threadsafe";
  TempDir dir;
  const std::string path = dir.file("train.bin");
  write_raw(path, raw_ids(counting(1 << 16, 300)));
  EXPECT_EXIT(
      {
        TokenFile f = open_token_file(path, 300);
        std::filesystem::resize_file(path, 4096);
        // The child dies without unwinding, so its own TempDir goes now: the
        // map keeps the cut file's pages, and the read past its end still faults.
        std::filesystem::remove_all(dir.path());
        volatile int64_t last = f.tokens[(1 << 16) - 1];  // past the new end
        (void)last;
      },
      ::testing::ExitedWithCode(1), "token file .*train.bin shrank while the run read it");
}

TEST(TokenFile, DamagedFilesAreRefusedInOneLine) {
  TempDir dir;
  auto refused = [&](const std::string& name, const std::vector<uint8_t>& bytes, const std::string& says) {
    write_raw(dir.file(name), bytes);
    const std::string e = error_of([&] { open_token_file(dir.file(name), 50257); });
    EXPECT_THAT(e, HasSubstr(says)) << name;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  };
  std::vector<uint8_t> truncated = llmc(counting(100, 7));
  truncated.erase(truncated.end() - 10, truncated.end());
  refused("truncated.bin", truncated, "is truncated: its header promises 100 tokens (1224 bytes), the file has 1214");
  std::vector<uint8_t> longer = llmc(counting(100, 7));
  longer.insert(longer.end(), 10, 0);
  refused("longer.bin", longer, "is longer than its header says: its header promises 100 tokens (1224 bytes)");
  std::vector<uint8_t> short_header = llmc(counting(100, 7));
  short_header.resize(500);  // the magic, and half a header
  refused("short_header.bin", short_header, "has llm.c's magic but only 500 bytes, shorter than its 1024-byte header");
  std::vector<uint8_t> negative = llmc(counting(100, 7));
  const int32_t minus_three = -3;
  std::memcpy(negative.data() + 8, &minus_three, 4);
  refused("negative.bin", negative, "has a negative token count (-3)");
  refused("magic.bin", llmc(counting(100, 7), 20240521), "has an llm.c header with magic 20240521 instead of 20240520");
  refused("v2.bin", llmc(counting(100, 7), kLlmcMagic, 2, 50), "holds uint32 ids (llm.c version 2)");
  refused("v9.bin", llmc(counting(100, 7), kLlmcMagic, 9), "has llm.c's magic but version 9");
  refused("odd.bin", {1, 2, 3}, "has an odd length (3 bytes)");
  refused("range.bin", raw_ids({5, 50257, 6}), "token 1 is 50257, outside the vocabulary of 50257");
  refused("empty.bin", {}, "is empty");
  EXPECT_THAT(error_of([&] { open_token_file(dir.file("none.bin"), 50257); }), HasSubstr("none.bin does not exist"));
  EXPECT_THAT(error_of([&] { open_token_file(dir.str(), 50257); }), HasSubstr("is a directory, not a file"));
  EXPECT_THAT(error_of([&] { open_token_file("/dev/zero", 50257); }),
              HasSubstr("token file /dev/zero is not a regular file"));
}

TEST(TokenFileDataset, BlocksOfTokensWithAValidationFileOrTheLastTenth) {
  TempDir dir;
  write_raw(dir.file("train.bin"), raw_ids(counting(1000, 300)));
  write_raw(dir.file("val.bin"), llmc(counting(200, 300)));
  auto ds = open_dataset(dir.file("train.bin"), {.block_size = 8, .val_path = dir.file("val.bin"), .vocab_size = 300});
  ASSERT_EQ(ds->kind(), DatasetKind::text);
  EXPECT_EQ(ds->num_classes(), 300);
  EXPECT_EQ(ds->num_train_items(), (1000 - 1) / 8);
  DistributedSampler s = make_sampler(*ds, {.order = Order::sequential, .rank_batch = 2});
  Batch b = ds->train_batch(s, 1);  // rows 2 and 3: tokens from 16 and 24
  EXPECT_EQ(b.x.data<int64_t>()[0], 16);
  EXPECT_EQ(b.y.data<int64_t>()[8 + 7], 32);
  EXPECT_EQ(ds->num_val_batches(4), ((200 - 1) / 8 + 3) / 4);
  EXPECT_THAT(ds->describe(), HasSubstr("(nanoGPT) + "));
  // Without a validation file: tokens from int(0.9 · 1000) validate.
  auto split = open_dataset(dir.file("train.bin"), {.block_size = 8, .vocab_size = 300});
  EXPECT_EQ(split->num_train_items(), (900 - 1) / 8);
  EXPECT_EQ(split->val_batch(1, 0).x.data<int64_t>()[0], 900 % 300);
  EXPECT_EQ(static_cast<TextDataset&>(*split).decode(std::vector<int64_t>{3, 14}), "3 14");
  // The flags of token files are refused with anything else.
  write_raw(dir.file("a.txt"), {'h', 'e', 'l', 'l', 'o', ' ', 'w', 'o', 'r', 'l', 'd'});
  EXPECT_THAT(error_of([&] { open_dataset(dir.file("a.txt"), {.block_size = 2, .vocab_size = 300}); }),
              HasSubstr("--val-data and --vocab-size go with token files"));
}

TEST(TokenTable, DecodesLlmcsTableAndRefusesDamagedOnes) {
  TempDir dir;
  auto table = [](uint32_t magic, uint32_t version, uint32_t n, int written) {
    std::vector<uint32_t> header(256, 0);
    header[0] = magic, header[1] = version, header[2] = n, header[3] = 2;
    std::vector<uint8_t> b(1024);
    std::memcpy(b.data(), header.data(), 1024);
    const std::vector<std::string> words = {"Hello", ",", " world", "!"};
    for (int i = 0; i < written; ++i) {
      b.push_back(static_cast<uint8_t>(words[i % 4].size()));
      b.insert(b.end(), words[i % 4].begin(), words[i % 4].end());
    }
    return b;
  };
  write_raw(dir.file("ok.bin"), table(kTokenTableMagic, 2, 4, 4));
  TokenTable t = load_token_table(dir.file("ok.bin"));
  EXPECT_EQ(t.size(), 4);
  EXPECT_EQ(t.end_of_text, 2);
  EXPECT_EQ(t.decode(std::vector<int64_t>{0, 1, 2, 3}), "Hello, world!");
  EXPECT_THAT(error_of([&] { t.decode(std::vector<int64_t>{4}); }), HasSubstr("outside the 4-token table"));
  write_raw(dir.file("short.bin"), table(kTokenTableMagic, 1, 4, 3));
  EXPECT_THAT(error_of([&] { load_token_table(dir.file("short.bin")); }), HasSubstr("truncated at token 3 of 4"));
  write_raw(dir.file("magic.bin"), table(7, 1, 4, 4));
  EXPECT_THAT(error_of([&] { load_token_table(dir.file("magic.bin")); }), HasSubstr("has magic 7, not 20240328"));
}

}  // namespace
}  // namespace artel::data
