#include "artel/nn/safetensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

namespace artel::nn {
namespace {

using nlohmann::json;

// safetensors' own limit: a header larger than this is not a weights file.
constexpr uint64_t kMaxHeader = 100ull << 20;

const char* st_dtype(DType t) {
  switch (t) {
    case DType::f32: return "F32";
    case DType::f64: return "F64";
    case DType::i32: return "I32";
    case DType::i64: return "I64";
    case DType::bf16: return "BF16";
  }
  return "?";
}

bool parse_dtype(const std::string& s, DType& out) {
  for (DType t : {DType::f32, DType::f64, DType::i32, DType::i64, DType::bf16})
    if (s == st_dtype(t)) return out = t, true;
  return false;
}

[[noreturn]] void fail(const std::string& source, const std::string& problem) {
  throw Error(source + ": not a valid safetensors file: " + problem,
              "the file is corrupt or truncated; write it again (artel writes safetensors atomically)");
}

struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin, end;
};

Entry parse_entry(const std::string& source, const std::string& name, const json& e) {
  auto bad = [&](const std::string& why) { fail(source, "tensor '" + name + "': " + why); };
  if (!e.is_object()) bad("entry is not a JSON object");
  if (!e.contains("dtype") || !e["dtype"].is_string()) bad("no \"dtype\" string");
  if (!e.contains("shape") || !e["shape"].is_array()) bad("no \"shape\" array");
  if (!e.contains("data_offsets") || !e["data_offsets"].is_array() || e["data_offsets"].size() != 2)
    bad("no \"data_offsets\" [begin, end] pair");
  Entry out{name, DType::f32, {}, 0, 0};
  std::string dt = e["dtype"].get<std::string>();
  if (!parse_dtype(dt, out.dtype)) bad("unsupported dtype '" + dt + "' (artel reads F32, F64, I32, I64, BF16)");
  uint64_t bytes = dtype_size(out.dtype);
  for (const json& d : e["shape"]) {
    if (!d.is_number_unsigned()) bad("shape " + e["shape"].dump() + " holds something other than sizes >= 0");
    uint64_t n = d.get<uint64_t>();
    if (n > (1ull << 40) || __builtin_mul_overflow(bytes, n, &bytes)) bad("shape " + e["shape"].dump() + " is too large");
    out.shape.push_back(static_cast<int64_t>(n));
  }
  const json& off = e["data_offsets"];
  if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned()) bad("data_offsets are not sizes >= 0");
  out.begin = off[0].get<uint64_t>();
  out.end = off[1].get<uint64_t>();
  if (out.end < out.begin) bad("data_offsets " + off.dump() + " end before they begin");
  if (out.end - out.begin != bytes)
    bad("shape " + e["shape"].dump() + " of " + dt + " needs " + std::to_string(bytes) + " bytes but data_offsets " +
        off.dump() + " span " + std::to_string(out.end - out.begin));
  return out;
}

// The entries must tile [0, data_size) exactly: no gaps, no overlaps, nothing past the end.
void check_layout(const std::string& source, std::vector<Entry>& entries, uint64_t data_size) {
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t at = 0;
  for (const Entry& e : entries) {
    std::string where = "tensor '" + e.name + "' data_offsets [" + std::to_string(e.begin) + ", " +
                        std::to_string(e.end) + "]";
    if (e.end > data_size) fail(source, where + " run past the data section (" + std::to_string(data_size) + " bytes)");
    if (e.begin < at) fail(source, where + " overlap the previous tensor (which ends at " + std::to_string(at) + ")");
    if (e.begin > at) fail(source, where + " leave a gap after byte " + std::to_string(at));
    at = e.end;
  }
  if (at != data_size)
    fail(source, "the tensors cover " + std::to_string(at) + " bytes of a " + std::to_string(data_size) +
                     "-byte data section");
}

std::string sys_error(const std::string& what, const std::string& path) {
  return what + " " + path + ": " + std::strerror(errno);
}

void write_all(int fd, const std::string& bytes, const std::string& path) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw Error(sys_error("cannot write", path), "check free disk space and permissions");
    done += static_cast<size_t>(n);
  }
}

std::string dir_of(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

std::string encode_safetensors(const std::map<std::string, Tensor>& tensors,
                               const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    ARTEL_CHECK(t.defined(), "safetensors: tensor '", name, "' is undefined");
    ARTEL_CHECK(name != "__metadata__", "safetensors: '__metadata__' is reserved and cannot name a tensor");
    header[name] = {{"dtype", st_dtype(t.dtype())}, {"shape", t.shape()}, {"data_offsets", {offset, offset + t.nbytes()}}};
    offset += t.nbytes();
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // data starts 8-byte aligned
  std::string out(8, '\0');
  uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  out.reserve(8 + text.size() + offset);
  out += text;
  for (const auto& [_, t] : tensors) out.append(static_cast<const char*>(t.raw()), t.nbytes());
  return out;
}

SafetensorsFile decode_safetensors(const std::string& bytes, const std::string& source) {
  if (bytes.size() < 8)
    fail(source, std::to_string(bytes.size()) + " bytes, shorter than the 8-byte header length");
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  if (n > bytes.size() - 8)
    fail(source, "header length " + std::to_string(n) + " runs past the end of the " + std::to_string(bytes.size()) +
                     "-byte file");
  if (n > kMaxHeader) fail(source, "header length " + std::to_string(n) + " exceeds 100 MiB");
  json header = json::parse(bytes.begin() + 8, bytes.begin() + 8 + static_cast<int64_t>(n), nullptr, false);
  if (header.is_discarded()) fail(source, "the header is not valid JSON");
  if (!header.is_object()) fail(source, "the header is not a JSON object");

  SafetensorsFile out;
  std::vector<Entry> entries;
  for (const auto& [key, value] : header.items()) {
    if (key == "__metadata__") {
      if (!value.is_object()) fail(source, "__metadata__ is not a JSON object");
      for (const auto& [k, v] : value.items()) {
        if (!v.is_string()) fail(source, "__metadata__ value of '" + k + "' is not a string");
        out.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    entries.push_back(parse_entry(source, key, value));
  }
  uint64_t data_size = bytes.size() - 8 - n;
  check_layout(source, entries, data_size);
  const char* data = bytes.data() + 8 + n;
  for (const Entry& e : entries) {
    Tensor t = Tensor::empty(e.shape, e.dtype);
    if (e.end > e.begin) std::memcpy(t.raw(), data + e.begin, e.end - e.begin);
    out.tensors[e.name] = std::move(t);
  }
  return out;
}

void write_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::string bytes = encode_safetensors(tensors, metadata);
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error(sys_error("cannot create", tmp), "check that the output directory exists and is writable");
  try {
    write_all(fd, bytes, tmp);
    if (::fsync(fd) != 0) throw Error(sys_error("cannot fsync", tmp));
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string msg = sys_error("cannot rename " + tmp + " to", path);
    ::unlink(tmp.c_str());
    throw Error(msg);
  }
  // The rename itself is durable only once the directory is synced.
  int dfd = ::open(dir_of(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

SafetensorsFile read_safetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(sys_error("cannot open", path), "check the path");
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw Error(sys_error("cannot read", path));
  return decode_safetensors(bytes, path);
}

void save_weights(const Module& module, const std::string& path, const std::map<std::string, std::string>& metadata) {
  write_safetensors(path, module.state_dict(), metadata);
}

void load_weights(Module& module, const std::string& path, bool strict) {
  SafetensorsFile file = read_safetensors(path);
  try {
    module.load_state_dict(file.tensors, strict);
  } catch (const Error& e) {
    throw Error(path + ": " + e.what());
  }
}

}  // namespace artel::nn
