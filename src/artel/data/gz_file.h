// Whole-file reads through zlib, so the readers accept a file gzip-compressed
// or not (gzread passes plain files through unchanged).
//
//   std::vector<uint8_t> bytes = read_gz_file("t10k-labels-idx1-ubyte.gz");
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace artel::data {

// All bytes of `path`, decompressed when it is gzip. Throws artel::Error naming
// the path when it is missing, not a regular file, unreadable, or a truncated
// or corrupt gzip stream.
std::vector<uint8_t> read_gz_file(const std::string& path);

}  // namespace artel::data
