#include "artel/data/token_table.h"

#include <cstring>

#include "artel/core/error.h"
#include "artel/core/regular_file.h"

namespace artel::data {

std::string TokenTable::decode(std::span<const int64_t> ids) const {
  std::string out;
  for (int64_t id : ids) {
    ARTEL_CHECK(id >= 0 && id < size(), "token id ", id, " is outside the ", size(), "-token table");
    out += tokens[static_cast<size_t>(id)];
  }
  return out;
}

TokenTable load_token_table(const std::string& path) {
  const std::string bytes = read_regular_file(path, "token table", "pass llm.c's gpt2_tokenizer.bin");
  uint32_t header[4] = {0, 0, 0, 0};
  if (bytes.size() < 1024) throw Error("token table " + path + " is shorter than its 1024-byte header");
  std::memcpy(header, bytes.data(), sizeof header);
  if (header[0] != kTokenTableMagic)
    throw Error("token table " + path + " has magic " + std::to_string(header[0]) + ", not " +
                    std::to_string(kTokenTableMagic),
                "pass llm.c's gpt2_tokenizer.bin");
  if (header[1] != 1 && header[1] != 2)
    throw Error("token table " + path + " has version " + std::to_string(header[1]), "artel reads versions 1 and 2");
  TokenTable t;
  t.end_of_text = header[1] == 2 ? static_cast<int64_t>(header[3]) : -1;
  size_t at = 1024;
  for (uint32_t id = 0; id < header[2]; ++id) {
    if (at >= bytes.size())
      throw Error("token table " + path + " is truncated at token " + std::to_string(id) + " of " +
                  std::to_string(header[2]));
    const auto n = static_cast<unsigned char>(bytes[at++]);
    if (at + n > bytes.size())
      throw Error("token table " + path + " is truncated at token " + std::to_string(id) + " of " +
                  std::to_string(header[2]));
    t.tokens.push_back(bytes.substr(at, n));
    at += n;
  }
  return t;
}

}  // namespace artel::data
