// The checkpoint file format, as bytes: the fixed prefix, the JSON header with
// its tensor table, and the trailer — encoded and validated here, away from
// the file I/O of checkpoint.cpp. Internal to the train layer.
//
//   auto plan = plan_checkpoint(ck);           // header bytes + table with offsets
//   CheckpointHeader h = decode_checkpoint_header(path, json_bytes, version, data_start, file_size);
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "artel/train/checkpoint.h"

namespace artel::train {

inline constexpr char kCheckpointMagic[8] = {'A', 'R', 'T', 'E', 'L', 'C', 'K', 'P'};
inline constexpr char kCheckpointEndMagic[8] = {'A', 'R', 'T', 'E', 'L', 'E', 'N', 'D'};
inline constexpr uint64_t kCheckpointPrefixBytes = 8 + 4 + 8;   // magic, version, header length
inline constexpr uint64_t kCheckpointTrailerBytes = 4 + 4 + 8;  // header CRC, zero, end magic
inline constexpr uint64_t kCheckpointAlign = 64;

inline uint64_t align_up(uint64_t n, uint64_t a) { return (n + a - 1) / a * a; }

// A checkpoint laid out for writing: prefix + JSON header bytes, then the data
// section from data_start (tensor offsets in `table` are absolute).
struct CheckpointPlan {
  std::string head;  // bytes [0, kCheckpointPrefixBytes + N)
  uint64_t data_start = 0;
  uint64_t data_bytes = 0;
  uint64_t file_bytes = 0;
  uint32_t head_crc = 0;
  std::vector<CheckpointTensorInfo> table;
};

// Checks the tensors (defined, unique non-empty names) and computes each one's CRC.
CheckpointPlan plan_checkpoint(const Checkpoint& ck, const std::string& path);

// Parses and validates the JSON header of a file of `file_size` bytes whose
// data section starts at `data_start`. Errors name `path`.
CheckpointHeader decode_checkpoint_header(const std::string& path, const std::string& json_bytes,
                                          uint32_t version, uint64_t data_start, uint64_t file_size);

// Dtype names as checkpoints write them (core's dtype_name); false for others.
bool parse_dtype(const std::string& s, DType& out);
// A generator state as JSON {seed, stream, counter, used}, and back (entry
// `i` of a list; errors name `path`).
nlohmann::json rng_to_json(const RngState& s);
RngState parse_rng(const std::string& path, const nlohmann::json& j, size_t i);

// Creates `path` atomically: `body` writes "<path>.tmp-<pid>" through the
// descriptor it is given, then fsync, rename onto `path`, fsync the
// directory. `path` either keeps what it held or has the new bytes, whole.
void write_atomically(const std::string& path, const std::function<void(int fd, const std::string& tmp)>& body);
// Writes all n bytes (errors name `path`).
void write_all(int fd, const void* data, uint64_t n, const std::string& path);

uint32_t checkpoint_crc32(const void* data, uint64_t n, uint32_t crc = 0);

// "checkpoint <path>: <problem>" with the hint every corrupt file gets.
[[noreturn]] void checkpoint_corrupt(const std::string& path, const std::string& problem);

}  // namespace artel::train
