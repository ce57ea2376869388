// TokenSplit: the tokens of one split of a text, whoever holds them — ids a
// reader decoded into memory (characters, words) or uint16 ids inside a
// memory-mapped token file (token_file.h), kept alive by the split. Reads
// are by position; a batch copies the few rows it needs.
//
//   TokenSplit a(std::vector<int32_t>{5, 3, 9});
//   TokenSplit b(mapping, ids, n);   // uint16 ids that `mapping` keeps mapped
//   int64_t t = b[i];
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace artel::data {

// How many of a text's n tokens train: int(0.9·n), without a float. The
// rest validate (characters, words, a token file without --val-data).
constexpr int64_t train_tokens(int64_t n) { return n / 10 * 9 + n % 10 * 9 / 10; }

class TokenSplit {
 public:
  TokenSplit() = default;
  explicit TokenSplit(std::vector<int32_t> ids);
  TokenSplit(std::shared_ptr<const void> owner, const uint16_t* ids, int64_t size)
      : owner_(std::move(owner)), u16_(ids), size_(size) {}

  int64_t size() const { return size_; }
  TokenSplit slice(int64_t begin, int64_t end) const;  // positions [begin, end), sharing the storage
  int64_t operator[](int64_t i) const { return i32_ ? i32_[i] : u16_[i]; }

 private:
  std::shared_ptr<const void> owner_;
  const int32_t* i32_ = nullptr;
  const uint16_t* u16_ = nullptr;
  int64_t size_ = 0;
};

}  // namespace artel::data
