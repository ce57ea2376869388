#include "artel/data/char_text.h"

#include <algorithm>

#include "artel/core/error.h"
#include "artel/data/gz_file.h"
#include "artel/data/token_split.h"

namespace artel::data {

CharVocab CharVocab::from_text(std::string_view text) {
  bool seen[256] = {};
  for (char c : text) seen[static_cast<uint8_t>(c)] = true;
  CharVocab v;
  std::fill(std::begin(v.id_), std::end(v.id_), int16_t{-1});
  for (int b = 0; b < 256; ++b)
    if (seen[b]) {
      v.id_[b] = static_cast<int16_t>(v.chars_.size());
      v.chars_.push_back(static_cast<char>(b));
    }
  return v;
}

int64_t CharVocab::id(char c) const {
  int16_t i = id_[static_cast<uint8_t>(c)];
  ARTEL_CHECK(i >= 0, "character byte ", int(static_cast<uint8_t>(c)), " is not in the ", size(),
              "-character vocabulary");
  return i;
}

std::vector<int64_t> CharVocab::encode(std::string_view text) const {
  std::vector<int64_t> ids;
  ids.reserve(text.size());
  for (char c : text) ids.push_back(id(c));
  return ids;
}

std::string CharVocab::decode(std::span<const int64_t> ids) const {
  std::string out;
  out.reserve(ids.size());
  for (int64_t i : ids) {
    ARTEL_CHECK(i >= 0 && i < size(), "token id ", i, " is outside the ", size(),
                "-character vocabulary (hint: the model's vocab_size must match the data's)");
    out.push_back(chars_[static_cast<size_t>(i)]);
  }
  return out;
}

CharText make_char_text(std::string_view text, std::string path) {
  if (text.empty()) throw Error("text file " + path + " is empty", "pass a non-empty text file to --data");
  CharText t;
  t.path = std::move(path);
  t.vocab = CharVocab::from_text(text);
  const auto n_train = static_cast<size_t>(train_tokens(static_cast<int64_t>(text.size())));
  t.train.reserve(n_train);
  t.val.reserve(text.size() - n_train);
  for (size_t i = 0; i < text.size(); ++i)
    (i < n_train ? t.train : t.val).push_back(static_cast<uint8_t>(t.vocab.id(text[i])));
  return t;
}

CharText load_char_text(const std::string& path) {
  std::vector<uint8_t> bytes = read_gz_file(path);
  return make_char_text(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), path);
}

}  // namespace artel::data
