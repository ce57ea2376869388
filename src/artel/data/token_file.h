// Token files: the uint16 token ids a tokenizer wrote once, read in place
// (memory-mapped), in the two layouts GPT-2 trainers use:
//   - nanoGPT's train.bin / val.bin: the ids and nothing else
//     (np.memmap(..., dtype=np.uint16));
//   - llm.c's: a header of 256 int32 (magic 20240520, version 1, token
//     count, zeros), then the ids (llm.c's version 2, uint32 ids, is refused).
// A file whose first int32 is not the magic is read as nanoGPT's, unless it
// looks like llm.c's with a damaged magic (version 1 or 2 and a count that
// fits the file exactly), which is refused. Every id must be below the
// vocabulary size; a bad header, a size that does not fit the layout, or an
// id out of range is an artel::Error naming the file and what is wrong.
//
//   TokenFile f = open_token_file("train.bin", /*vocab=*/50257);
//   f.tokens[0];  f.tokens.size();  f.layout;   // "llm.c" or "nanoGPT"
#pragma once

#include <cstdint>
#include <string>

#include "artel/data/token_split.h"

namespace artel::data {

inline constexpr int32_t kLlmcMagic = 20240520;
inline constexpr int64_t kLlmcHeaderBytes = 256 * 4;

struct TokenFile {
  std::string path;
  std::string layout;  // "llm.c" | "nanoGPT"
  TokenSplit tokens;
};

// Maps `path` and checks it (see above): every id < vocab_size.
TokenFile open_token_file(const std::string& path, int64_t vocab_size);

}  // namespace artel::data
