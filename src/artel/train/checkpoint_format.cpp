#include "artel/train/checkpoint_format.h"

#include <zlib.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <set>

namespace artel::train {

// Note [Checkpoint file format]
// A checkpoint file (a worker's shard of a sharded checkpoint,
// checkpoint_store.h) is readable without any other file and checkable
// without trusting any of it:
//
//   offset 0    "ARTELCKP"                      8 bytes
//          8    u32 format version              (kCheckpointFormatVersion)
//          12   u64 N, the JSON header's length
//          20   N bytes of JSON:
//               {"step", "sampler_position", "meta", "rng": [{seed, stream,
//                counter, used}], "data_bytes", "tensors": [{name, dtype,
//                shape, offset, nbytes, crc32}]}
//               offsets count from the data section's start
//   data_start = 20 + N rounded up to 64 (zero padding)
//               tensor data, each tensor at a 64-byte aligned offset, in table order
//   data_start + data_bytes:
//               u32 CRC32 of bytes [0, 20 + N), u32 0, "ARTELEND"
//
// The closing magic is the last thing written, and the file's size is implied
// by the header (data_start + data_bytes + 16), so a truncated file is always
// detected; the header CRC guards the table, and each tensor's CRC its data.
// Integers are little-endian (every machine artel runs on is).
static_assert(std::endian::native == std::endian::little, "checkpoints are written little-endian");

using nlohmann::json;

bool parse_dtype(const std::string& s, DType& out) {
  for (DType t : {DType::f32, DType::f64, DType::i32, DType::i64, DType::bf16})
    if (s == dtype_name(t)) return out = t, true;
  return false;
}

json rng_to_json(const RngState& s) {
  return {{"seed", s.seed}, {"stream", s.stream}, {"counter", s.counter}, {"used", s.used}};
}

namespace {

const char* dtype_key(DType t) { return dtype_name(t); }

// The field `key` of object `j`, which must be an unsigned integer that fits in T.
template <class T>
T get_uint(const std::string& path, const json& j, const char* key, const std::string& where) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number_unsigned())
    checkpoint_corrupt(path, where + ": field \"" + key + "\" is missing or not an unsigned integer");
  uint64_t v = j[key].get<uint64_t>();
  if (v > static_cast<uint64_t>(std::numeric_limits<T>::max()))
    checkpoint_corrupt(path, where + ": field \"" + key + "\" is out of range");
  return static_cast<T>(v);
}

int64_t get_int(const std::string& path, const json& j, const char* key) {
  if (!j.contains(key) || !j[key].is_number_integer())
    checkpoint_corrupt(path, std::string("header field \"") + key + "\" is missing or not an integer");
  return j[key].get<int64_t>();
}

}  // namespace

RngState parse_rng(const std::string& path, const json& j, size_t i) {
  std::string where = "rng state " + std::to_string(i);
  RngState s;
  s.seed = get_uint<uint64_t>(path, j, "seed", where);
  s.stream = get_uint<uint64_t>(path, j, "stream", where);
  s.counter = get_uint<uint64_t>(path, j, "counter", where);
  s.used = get_uint<uint32_t>(path, j, "used", where);
  if (s.used > 4) checkpoint_corrupt(path, where + ": \"used\" is " + std::to_string(s.used) + ", at most 4");
  return s;
}

namespace {

CheckpointTensorInfo parse_entry(const std::string& path, const json& e, uint64_t data_start,
                                 uint64_t data_bytes) {
  if (!e.is_object() || !e.contains("name") || !e["name"].is_string() || e["name"].get<std::string>().empty())
    checkpoint_corrupt(path, "a tensor table entry has no name");
  CheckpointTensorInfo t;
  t.name = e["name"].get<std::string>();
  std::string where = "tensor '" + t.name + "'";
  if (!e.contains("dtype") || !e["dtype"].is_string() || !parse_dtype(e["dtype"].get<std::string>(), t.dtype))
    checkpoint_corrupt(path, where + ": missing or unsupported dtype");
  if (!e.contains("shape") || !e["shape"].is_array()) checkpoint_corrupt(path, where + ": no shape array");
  uint64_t numel = 1;
  for (const json& d : e["shape"]) {
    if (!d.is_number_unsigned()) checkpoint_corrupt(path, where + ": a dimension is not a non-negative integer");
    uint64_t v = d.get<uint64_t>();
    if (v > (uint64_t{1} << 62) || __builtin_mul_overflow(numel, v, &numel))
      checkpoint_corrupt(path, where + ": the shape is too large");
    t.shape.push_back(static_cast<int64_t>(v));
  }
  uint64_t rel = get_uint<uint64_t>(path, e, "offset", where);
  t.nbytes = get_uint<uint64_t>(path, e, "nbytes", where);
  t.crc32 = get_uint<uint32_t>(path, e, "crc32", where);
  uint64_t want = 0;
  if (__builtin_mul_overflow(numel, dtype_size(t.dtype), &want) || want != t.nbytes)
    checkpoint_corrupt(path, where + ": nbytes " + std::to_string(t.nbytes) + " does not match shape " +
                                 shape_str(t.shape) + " of " + dtype_name(t.dtype));
  if (rel % kCheckpointAlign != 0) checkpoint_corrupt(path, where + ": offset is not 64-byte aligned");
  if (rel > data_bytes || t.nbytes > data_bytes - rel)
    checkpoint_corrupt(path, where + ": data lies outside the data section");
  t.offset = data_start + rel;
  return t;
}

// Tensors must not overlap (each byte of data belongs to one tensor at most).
void check_no_overlap(const std::string& path, std::vector<CheckpointTensorInfo> table) {
  std::sort(table.begin(), table.end(), [](const auto& a, const auto& b) { return a.offset < b.offset; });
  for (size_t i = 1; i < table.size(); ++i)
    if (table[i - 1].offset + table[i - 1].nbytes > table[i].offset)
      checkpoint_corrupt(path, "tensors '" + table[i - 1].name + "' and '" + table[i].name + "' overlap");
}

}  // namespace

uint32_t checkpoint_crc32(const void* data, uint64_t n, uint32_t crc) {
  return static_cast<uint32_t>(crc32_z(crc, static_cast<const Bytef*>(data), static_cast<z_size_t>(n)));
}

void checkpoint_corrupt(const std::string& path, const std::string& problem) {
  throw Error("checkpoint " + path + ": " + problem,
              "the file is damaged or was not completely written; delete it to resume from an older checkpoint");
}

CheckpointPlan plan_checkpoint(const Checkpoint& ck, const std::string& path) {
  ARTEL_CHECK(ck.meta.is_object(), "checkpoint ", path, ": meta must be a JSON object");
  std::set<std::string> seen;
  json tensors = json::array();
  CheckpointPlan plan;
  uint64_t offset = 0;
  for (const auto& [name, t] : ck.tensors) {
    ARTEL_CHECK(!name.empty(), "checkpoint ", path, ": a tensor has an empty name");
    ARTEL_CHECK(seen.insert(name).second, "checkpoint ", path, ": tensor '", name, "' is added twice");
    ARTEL_CHECK(t.defined(), "checkpoint ", path, ": tensor '", name, "' is undefined");
    offset = align_up(offset, kCheckpointAlign);
    CheckpointTensorInfo info{name, t.dtype(), t.shape(), offset, t.nbytes(), checkpoint_crc32(t.raw(), t.nbytes())};
    tensors.push_back({{"name", name}, {"dtype", dtype_key(t.dtype())}, {"shape", t.shape()},
                       {"offset", offset}, {"nbytes", info.nbytes}, {"crc32", info.crc32}});
    plan.table.push_back(std::move(info));
    offset += t.nbytes();
  }
  json rng = json::array();
  for (const RngState& s : ck.rng) rng.push_back(rng_to_json(s));
  json header = {{"step", ck.step}, {"sampler_position", ck.sampler_position}, {"meta", ck.meta},
                 {"rng", rng}, {"data_bytes", offset}, {"tensors", tensors}};
  std::string text = header.dump();

  plan.head.resize(kCheckpointPrefixBytes);
  uint32_t version = kCheckpointFormatVersion;
  uint64_t n = text.size();
  std::memcpy(plan.head.data(), kCheckpointMagic, 8);
  std::memcpy(plan.head.data() + 8, &version, 4);
  std::memcpy(plan.head.data() + 12, &n, 8);
  plan.head += text;
  plan.head_crc = checkpoint_crc32(plan.head.data(), plan.head.size());
  plan.data_start = align_up(plan.head.size(), kCheckpointAlign);
  plan.data_bytes = offset;
  plan.file_bytes = plan.data_start + plan.data_bytes + kCheckpointTrailerBytes;
  for (auto& info : plan.table) info.offset += plan.data_start;
  return plan;
}

CheckpointHeader decode_checkpoint_header(const std::string& path, const std::string& json_bytes,
                                          uint32_t version, uint64_t data_start, uint64_t file_size) {
  json h = json::parse(json_bytes, nullptr, /*allow_exceptions=*/false);
  if (h.is_discarded() || !h.is_object()) checkpoint_corrupt(path, "the header is not a JSON object");
  CheckpointHeader out;
  out.version = version;
  out.step = get_int(path, h, "step");
  out.sampler_position = get_int(path, h, "sampler_position");
  if (out.step < 0 || out.sampler_position < 0) checkpoint_corrupt(path, "negative step or sampler position");
  if (!h.contains("meta") || !h["meta"].is_object()) checkpoint_corrupt(path, "header field \"meta\" is not an object");
  out.meta = h["meta"];
  if (!h.contains("rng") || !h["rng"].is_array()) checkpoint_corrupt(path, "header field \"rng\" is not an array");
  for (size_t i = 0; i < h["rng"].size(); ++i) out.rng.push_back(parse_rng(path, h["rng"][i], i));

  uint64_t data_bytes = get_uint<uint64_t>(path, h, "data_bytes", "header");
  uint64_t want = data_start + kCheckpointTrailerBytes;
  if (data_bytes > file_size || want > file_size - data_bytes)
    checkpoint_corrupt(path, "truncated: " + std::to_string(file_size) + " bytes, the header describes " +
                                 std::to_string(data_start + data_bytes + kCheckpointTrailerBytes));
  if (want + data_bytes != file_size)
    checkpoint_corrupt(path, std::to_string(file_size) + " bytes, the header describes " +
                                 std::to_string(want + data_bytes));

  if (!h.contains("tensors") || !h["tensors"].is_array())
    checkpoint_corrupt(path, "header field \"tensors\" is not an array");
  std::set<std::string> seen;
  for (const json& e : h["tensors"]) {
    out.tensors.push_back(parse_entry(path, e, data_start, data_bytes));
    if (!seen.insert(out.tensors.back().name).second)
      checkpoint_corrupt(path, "tensor '" + out.tensors.back().name + "' appears twice in the table");
  }
  check_no_overlap(path, out.tensors);
  return out;
}

}  // namespace artel::train
