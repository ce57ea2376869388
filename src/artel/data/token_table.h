// llm.c's token table (gpt2_tokenizer.bin): the bytes each token id stands
// for, to print a token model's samples as text. Decoding only — GPT-2's
// encoder needs its merges, which the file does not hold.
//   header: 256 uint32 — magic 20240328, version (1, or 2 with the
//           end-of-text id at [3]), vocabulary size
//   then, per id: one byte n, then the id's n bytes
//
//   TokenTable t = load_token_table("gpt2_tokenizer.bin");
//   std::string s = t.decode(ids);   // the ids' bytes, concatenated
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace artel::data {

inline constexpr uint32_t kTokenTableMagic = 20240328;

struct TokenTable {
  std::vector<std::string> tokens;  // id -> bytes
  int64_t end_of_text = -1;         // version 2's; -1 when the file has none
  int64_t size() const { return static_cast<int64_t>(tokens.size()); }
  // Throws naming an id outside the table.
  std::string decode(std::span<const int64_t> ids) const;
};

// Throws naming the file and what is wrong: missing, a bad magic or version, truncated.
TokenTable load_token_table(const std::string& path);

}  // namespace artel::data
