#include "artel/data/word_text.h"

#include <algorithm>

#include "artel/core/error.h"
#include "artel/data/gz_file.h"
#include "artel/data/token_split.h"

namespace artel::data {

namespace {
bool word_byte(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '\''; }
bool space_byte(char c) { return c == ' ' || c == '\t' || c == '\r'; }
}  // namespace

std::vector<std::string_view> split_words(std::string_view text) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < text.size()) {
    if (space_byte(text[i])) {
      ++i;
      continue;
    }
    size_t j = i + 1;
    if (word_byte(text[i]))
      while (j < text.size() && word_byte(text[j])) ++j;
    out.push_back(text.substr(i, j - i));
    i = j;
  }
  return out;
}

WordVocab WordVocab::from_words(const std::vector<std::string_view>& words) {
  WordVocab v;
  v.words_.assign(words.begin(), words.end());
  std::sort(v.words_.begin(), v.words_.end());
  v.words_.erase(std::unique(v.words_.begin(), v.words_.end()), v.words_.end());
  v.ids_.reserve(v.words_.size());
  for (size_t i = 0; i < v.words_.size(); ++i) v.ids_.emplace(v.words_[i], static_cast<int64_t>(i));
  return v;
}

int64_t WordVocab::id(std::string_view word) const {
  auto it = ids_.find(std::string(word));
  if (it == ids_.end()) throw Error("word '" + std::string(word) + "' is not in the " + std::to_string(size()) + "-word vocabulary");
  return it->second;
}

const std::string& WordVocab::word(int64_t id) const {
  ARTEL_CHECK(id >= 0 && id < size(), "token id ", id, " is outside the ", size(),
              "-word vocabulary (hint: the model's vocab_size must match the data's)");
  return words_[static_cast<size_t>(id)];
}

std::string WordVocab::decode(std::span<const int64_t> ids) const {
  std::string out;
  for (int64_t i : ids) {
    const std::string& w = word(i);
    if (!out.empty() && out.back() != '\n' && w != "\n") out.push_back(' ');
    out += w;
  }
  return out;
}

WordText make_word_text(std::string_view text, std::string path) {
  std::vector<std::string_view> words = split_words(text);
  if (words.empty()) throw Error("text file " + path + " has no words", "pass a text file with words to --data");
  WordText t;
  t.path = std::move(path);
  t.vocab = WordVocab::from_words(words);
  const auto n_train = static_cast<size_t>(train_tokens(static_cast<int64_t>(words.size())));
  for (size_t i = 0; i < words.size(); ++i)
    (i < n_train ? t.train : t.val).push_back(static_cast<int32_t>(t.vocab.id(words[i])));
  return t;
}

WordText load_word_text(const std::string& path) {
  std::vector<uint8_t> bytes = read_gz_file(path);
  return make_word_text(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), path);
}

}  // namespace artel::data
