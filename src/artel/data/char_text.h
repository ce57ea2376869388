// Character-level text (Karpathy's char-rnn / nanoGPT shakespeare_char): the
// file is read as bytes, the vocabulary is its sorted distinct bytes, and the
// first int(0.9·n) tokens train, the rest validate.
//
// Token ids are int64 in batches (the same index type as MNIST labels, and
// what an embedding or a cross-entropy takes); the splits store them as bytes,
// since a vocabulary of bytes has at most 256 entries.
//
//   CharText t = load_char_text("data/tinyshakespeare.txt");
//   t.vocab.size();                       // 65
//   std::string s = t.vocab.decode(ids);  // for printing generated text
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace artel::data {

class CharVocab {
 public:
  CharVocab() = default;
  // The sorted distinct bytes of `text`.
  static CharVocab from_text(std::string_view text);

  int64_t size() const { return static_cast<int64_t>(chars_.size()); }
  const std::string& chars() const { return chars_; }  // id -> byte, sorted
  bool contains(char c) const { return id_[static_cast<uint8_t>(c)] >= 0; }
  // Throws artel::Error on a byte not in the vocabulary.
  int64_t id(char c) const;
  std::vector<int64_t> encode(std::string_view text) const;
  // Throws artel::Error on an id outside [0, size()).
  std::string decode(std::span<const int64_t> ids) const;

 private:
  std::string chars_;
  int16_t id_[256];  // byte -> id, -1 when absent
};

struct CharText {
  std::string path;
  CharVocab vocab;
  std::vector<uint8_t> train, val;  // token ids
};

// Splits `text` (n bytes) at int(0.9·n). Throws on empty text.
CharText make_char_text(std::string_view text, std::string path = "<text>");
// Reads `path` as bytes (gzip accepted). Throws on a missing, unreadable or empty file.
CharText load_char_text(const std::string& path);

}  // namespace artel::data
