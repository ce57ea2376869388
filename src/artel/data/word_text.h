// Word-level text: the bundled text as a sequence of words, for a language
// model with one embedding row per distinct word (a large vocabulary, of
// which a batch touches few rows: the case parameter servers' sparse tables
// are for). A token is a run of letters and apostrophes ("king's"), any other
// non-space byte alone (",", "!"), or a newline; spaces and tabs only
// separate. Case is kept. The vocabulary is the sorted distinct tokens of the
// whole file and, as for characters, the first int(0.9·n) tokens train, the
// rest validate.
//
//   WordText t = load_word_text("data/tinyshakespeare.txt");
//   t.vocab.size();                       // 14,565 for tinyshakespeare
//   std::string s = t.vocab.decode(ids);  // tokens joined by spaces
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace artel::data {

// The tokens of `text` (see the header comment), in order.
std::vector<std::string_view> split_words(std::string_view text);

class WordVocab {
 public:
  WordVocab() = default;
  // The sorted distinct tokens of `words`.
  static WordVocab from_words(const std::vector<std::string_view>& words);

  int64_t size() const { return static_cast<int64_t>(words_.size()); }
  // Throws artel::Error on a token not in the vocabulary.
  int64_t id(std::string_view word) const;
  const std::string& word(int64_t id) const;  // throws outside [0, size())
  // Tokens joined by single spaces (a newline token stands alone).
  std::string decode(std::span<const int64_t> ids) const;

 private:
  std::vector<std::string> words_;  // id -> token, sorted
  std::unordered_map<std::string, int64_t> ids_;
};

struct WordText {
  std::string path;
  WordVocab vocab;
  std::vector<int32_t> train, val;  // token ids
};

// Splits `text`'s tokens at int(0.9·n). Throws when the text has no token.
WordText make_word_text(std::string_view text, std::string path = "<text>");
// Reads `path` as bytes (gzip accepted). Throws on a missing, unreadable or wordless file.
WordText load_word_text(const std::string& path);

}  // namespace artel::data
