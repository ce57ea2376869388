// Sizes of memory as a user writes them (`--memory-per-worker 3G`), in binary
// units as Slurm's --mem and docker's --memory read them: K, M, G and T are
// 2^10, 2^20, 2^30 and 2^40 bytes, with or without "iB"; a bare number is
// bytes; a fraction is allowed before a unit.
//
//   parse_memory_size("3G")          // 3221225472
//   parse_memory_size("512MiB")      // 536870912
//   parse_memory_size("1500000000")  // 1500000000
//   format_memory_size(3221225472)   // "3 GiB"
#pragma once

#include <cstdint>
#include <string>

namespace artel::launch {

// Bytes, > 0. Throws artel::Error quoting the text when it is not a size
// ("3GB" included: decimal or binary would be a guess, so it says to write 3G
// or 3GiB).
int64_t parse_memory_size(const std::string& text);

// "3 GiB", "200 MiB", "1.50 GiB", "4096 bytes": the largest unit with a value
// of at least 1, two decimals when the value is not whole.
std::string format_memory_size(int64_t bytes);

}  // namespace artel::launch
