#include "artel/data/word_text.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "artel/core/error.h"
#include "artel/data/dataset.h"
#include "error_of.h"

namespace artel::data {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using test_support::error_of;

std::vector<std::string> words_of(std::string_view text) {
  std::vector<std::string> out;
  for (std::string_view w : split_words(text)) out.emplace_back(w);
  return out;
}

TEST(WordText, TokensAreWordsPunctuationAndNewlines) {
  EXPECT_THAT(words_of("First Citizen:\nWe're  all\tresolved!"),
              ElementsAre("First", "Citizen", ":", "\n", "We're", "all", "resolved", "!"));
  EXPECT_THAT(words_of("  \r\n"), ElementsAre("\n"));
  EXPECT_TRUE(words_of(" \t ").empty());
}

TEST(WordText, VocabularyIsSortedDistinctTokensAndSplitsAtNinetyPercent) {
  WordText t = make_word_text("b a b a c\nd e f g h", "t.txt");
  EXPECT_EQ(t.vocab.size(), 9);  // \n a b c d e f g h
  EXPECT_EQ(t.vocab.word(0), "\n");
  EXPECT_EQ(t.vocab.id("a"), 1);
  EXPECT_EQ(t.train.size(), 9u);  // int(0.9 · 11)
  EXPECT_EQ(t.val.size(), 2u);
  EXPECT_EQ(t.vocab.decode(std::vector<int64_t>{2, 1, 0, 4}), "b a\nd");
  EXPECT_THAT(error_of([&] { t.vocab.id("zebra"); }), HasSubstr("'zebra' is not in the 9-word vocabulary"));
  EXPECT_THAT(error_of([&] { t.vocab.word(9); }), HasSubstr("token id 9 is outside the 9-word vocabulary"));
  EXPECT_THAT(error_of([] { make_word_text(" \t", "blank.txt"); }), HasSubstr("blank.txt has no words"));
}

TEST(WordTextDataset, TinyShakespeareAsWords) {
  auto ds = open_dataset(std::string(ARTEL_SOURCE_DIR) + "/data/tinyshakespeare.txt", {.block_size = 8, .words = true});
  ASSERT_EQ(ds->kind(), DatasetKind::text);
  EXPECT_EQ(ds->num_classes(), 14565);
  auto& text = static_cast<WordTextDataset&>(*ds);
  DistributedSampler s = make_sampler(*ds, {.order = Order::sequential, .rank_batch = 2});
  Batch b = ds->train_batch(s, 0);
  ASSERT_EQ(b.x.shape(), (Shape{2, 8}));
  const int64_t* x = b.x.data<int64_t>();
  EXPECT_EQ(text.decode(std::vector<int64_t>(x, x + 8)), "First Citizen :\nBefore we proceed any");
  EXPECT_EQ(b.y.data<int64_t>()[0], x[1]);  // the next word
  EXPECT_THAT(ds->describe(), HasSubstr("263069 train / 29230 validation words, vocabulary 14565"));
}

}  // namespace
}  // namespace artel::data
