// Test helpers: a temporary directory removed at the end of the test
// (temp_dir.h), and small files written into it, plain or gzip-compressed
// with zlib.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "temp_dir.h"

namespace artel::data::testing {

using test_support::TempDir;

inline void write_raw(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

inline void write_gz(const std::string& path, const std::vector<uint8_t>& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  if (!f) throw std::runtime_error("gzopen failed for " + path);
  gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(f);
}

inline void put_be32(std::vector<uint8_t>& b, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<uint8_t>(v >> s));
}

// An IDX images file of n 28x28 images; pixel p of image i is (i + p) % 256.
inline std::vector<uint8_t> idx_images(uint32_t n, uint32_t magic = 2051, uint32_t rows = 28, uint32_t cols = 28) {
  std::vector<uint8_t> b;
  put_be32(b, magic), put_be32(b, n), put_be32(b, rows), put_be32(b, cols);
  for (uint32_t i = 0; i < n; ++i)
    for (uint32_t p = 0; p < rows * cols; ++p) b.push_back(static_cast<uint8_t>((i + p) % 256));
  return b;
}

// An IDX labels file of n labels; label i is i % 10.
inline std::vector<uint8_t> idx_labels(uint32_t n, uint32_t magic = 2049) {
  std::vector<uint8_t> b;
  put_be32(b, magic), put_be32(b, n);
  for (uint32_t i = 0; i < n; ++i) b.push_back(static_cast<uint8_t>(i % 10));
  return b;
}

}  // namespace artel::data::testing
