#include "artel/nn/safetensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <sys/types.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <vector>

#include "artel/core/regular_file.h"

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
  if (!parse_dtype(dt, out.dtype))  // a valid file (F16 is the Hub's commonest), so not "corrupt"
    throw Error(source + ": tensor '" + name + "' is " + dt + ", which artel does not read (it reads F32, F64, I32, "
                    "I64, BF16)",
                "convert the file to float32 (in PyTorch: {k: v.float() for k, v in ...}, then save_file)");
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


// The 8-byte length and the JSON header (padded so the data starts 8-byte
// aligned) of tensors laid out in name order; `offsets` gets each one's.
std::string header_bytes(const std::map<std::string, std::pair<DType, Shape>>& layout,
                         const std::map<std::string, std::string>& metadata, std::map<std::string, uint64_t>& offsets,
                         uint64_t& data_bytes) {
  json header = json::object();
  uint64_t offset = 0;
  for (const auto& [name, entry] : layout) {
    ARTEL_CHECK(name != "__metadata__", "safetensors: '__metadata__' is reserved and cannot name a tensor");
    const uint64_t n = static_cast<uint64_t>(shape_numel(entry.second)) * dtype_size(entry.first);
    header[name] = {{"dtype", st_dtype(entry.first)}, {"shape", entry.second}, {"data_offsets", {offset, offset + n}}};
    offsets[name] = offset;
    offset += n;
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // data starts 8-byte aligned
  std::string out(8, '\0');
  uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  data_bytes = offset;
  return out + text;
}

std::map<std::string, std::pair<DType, Shape>> layout_of(const std::map<std::string, Tensor>& tensors) {
  std::map<std::string, std::pair<DType, Shape>> layout;
  for (const auto& [name, t] : tensors) {
    ARTEL_CHECK(t.defined(), "safetensors: tensor '", name, "' is undefined");
    layout[name] = {t.dtype(), t.shape()};
  }
  return layout;
}

void sync_dir_of(const std::string& path) {  // a rename is durable only once its directory is synced
  int dfd = ::open(dir_of(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace

std::string encode_safetensors(const std::map<std::string, Tensor>& tensors,
                               const std::map<std::string, std::string>& metadata) {
  std::map<std::string, uint64_t> offsets;
  uint64_t data = 0;
  std::string out = header_bytes(layout_of(tensors), metadata, offsets, data);
  out.reserve(out.size() + data);
  for (const auto& [_, t] : tensors) out.append(static_cast<const char*>(t.raw()), t.nbytes());
  return out;
}

SafetensorsWriter::SafetensorsWriter(std::string path, const std::map<std::string, std::pair<DType, Shape>>& layout,
                                     const std::map<std::string, std::string>& metadata)
    : path_(std::move(path)), layout_(layout) {
  // Said before anything is written: the rename at the end failed on it, with
  // "cannot rename ... Is a directory" and no hint, after the whole file.
  std::error_code ec;
  ARTEL_CHECK(!std::filesystem::is_directory(path_, ec), "safetensors file ", path_, " is a directory, not a file",
              " (hint: name a file inside it, e.g. ", (std::filesystem::path(path_) / "model.safetensors").string(), ")");
  path_ = replaceable_file(path_, "safetensors file");  // a link's target; never a device or a FIFO
  tmp_ = path_ + ".tmp." + std::to_string(::getpid());
  uint64_t data = 0;
  const std::string header = header_bytes(layout_, metadata, offsets_, data);
  data_start_ = header.size();
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throw Error(sys_error("cannot create", tmp_), "check that the output directory exists and is writable");
  try {
    write_all(fd_, header, tmp_);
    if (::ftruncate(fd_, static_cast<off_t>(data_start_ + data)) != 0)
      throw Error(sys_error("cannot size", tmp_), "check free disk space");
  } catch (...) {
    abandon();
    throw;
  }
}

SafetensorsWriter::~SafetensorsWriter() { abandon(); }

void SafetensorsWriter::abandon() {
  if (fd_ < 0) return;
  ::close(fd_);
  ::unlink(tmp_.c_str());
  fd_ = -1;
}

void SafetensorsWriter::write(const std::string& name, const Tensor& t) {
  auto it = layout_.find(name);
  ARTEL_CHECK(it != layout_.end(), "safetensors ", path_, ": no tensor '", name, "' in the layout");
  ARTEL_CHECK(fd_ >= 0 && t.dtype() == it->second.first && t.shape() == it->second.second, "safetensors ", path_,
              ": tensor '", name, "' is ", dtype_name(t.dtype()), " ", shape_str(t.shape()), ", the layout says ",
              dtype_name(it->second.first), " ", shape_str(it->second.second));
  const auto* p = static_cast<const char*>(t.raw());
  size_t done = 0;
  const off_t at = static_cast<off_t>(data_start_ + offsets_.at(name));
  while (done < t.nbytes()) {
    ssize_t n = ::pwrite(fd_, p + done, t.nbytes() - done, at + static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw Error(sys_error("cannot write", tmp_), "check free disk space and permissions");
    done += static_cast<size_t>(n);
  }
  written_.insert(name);
}

void SafetensorsWriter::commit() {
  for (const auto& [name, _] : layout_)
    ARTEL_CHECK(written_.count(name), "safetensors ", path_, ": tensor '", name, "' was never written");
  if (::fsync(fd_) != 0) throw Error(sys_error("cannot fsync", tmp_));
  ::close(fd_);
  fd_ = -1;
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
    std::string msg = sys_error("cannot rename " + tmp_ + " to", path_);
    ::unlink(tmp_.c_str());
    throw Error(msg);
  }
  sync_dir_of(path_);
}

namespace {

// Checks a header's JSON against a data section of `data_size` bytes.
std::vector<Entry> parse_header(const std::string& source, const char* text, uint64_t n, uint64_t data_size,
                                std::map<std::string, std::string>& metadata) {
  if (n > kMaxHeader) fail(source, "header length " + std::to_string(n) + " exceeds 100 MiB");
  json header = json::parse(text, text + n, nullptr, false);
  if (header.is_discarded()) fail(source, "the header is not valid JSON");
  if (!header.is_object()) fail(source, "the header is not a JSON object");
  std::vector<Entry> entries;
  for (const auto& [key, value] : header.items()) {
    if (key == "__metadata__") {
      if (!value.is_object()) fail(source, "__metadata__ is not a JSON object");
      for (const auto& [k, v] : value.items()) {
        if (!v.is_string()) fail(source, "__metadata__ value of '" + k + "' is not a string");
        metadata[k] = v.get<std::string>();
      }
      continue;
    }
    entries.push_back(parse_entry(source, key, value));
  }
  check_layout(source, entries, data_size);
  return entries;
}

uint64_t header_length(const unsigned char* b) {
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(b[i]) << (8 * i);
  return n;
}

void read_at(int fd, char* out, uint64_t n, uint64_t at, const std::string& path) {
  uint64_t done = 0;
  while (done < n) {
    ssize_t r = ::pread(fd, out + done, n - done, static_cast<off_t>(at + done));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) throw Error(sys_error("cannot read", path), "the file is truncated or unreadable");
    done += static_cast<uint64_t>(r);
  }
}

}  // namespace

SafetensorsFile decode_safetensors(const std::string& bytes, const std::string& source) {
  if (bytes.size() < 8)
    fail(source, std::to_string(bytes.size()) + " bytes, shorter than the 8-byte header length");
  const uint64_t n = header_length(reinterpret_cast<const unsigned char*>(bytes.data()));
  if (n > bytes.size() - 8)
    fail(source, "header length " + std::to_string(n) + " runs past the end of the " + std::to_string(bytes.size()) +
                     "-byte file");
  SafetensorsFile out;
  const std::vector<Entry> entries = parse_header(source, bytes.data() + 8, n, bytes.size() - 8 - n, out.metadata);
  const char* data = bytes.data() + 8 + n;
  for (const Entry& e : entries) {
    Tensor t = Tensor::empty(e.shape, e.dtype);
    if (e.end > e.begin) std::memcpy(t.raw(), data + e.begin, e.end - e.begin);
    out.tensors[e.name] = std::move(t);
  }
  return out;
}

SafetensorsReader::SafetensorsReader(std::string path) : path_(std::move(path)) {
  check_regular_file(path_, "safetensors file");
  fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) throw Error(sys_error("cannot open", path_), "check the path");
  try {
    const off_t size = ::lseek(fd_, 0, SEEK_END);
    if (size < 8) fail(path_, std::to_string(size) + " bytes, shorter than the 8-byte header length");
    unsigned char len[8];
    read_at(fd_, reinterpret_cast<char*>(len), 8, 0, path_);
    const uint64_t n = header_length(len);
    if (n > static_cast<uint64_t>(size) - 8)
      fail(path_, "header length " + std::to_string(n) + " runs past the end of the " + std::to_string(size) +
                      "-byte file");
    if (n > kMaxHeader) fail(path_, "header length " + std::to_string(n) + " exceeds 100 MiB");
    std::string text(n, '\0');
    read_at(fd_, text.data(), n, 8, path_);
    for (const auto& e : parse_header(path_, text.data(), n, static_cast<uint64_t>(size) - 8 - n, metadata_))
      entries_[e.name] = {e.dtype, e.shape, e.begin, e.end};
    data_start_ = 8 + n;
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

SafetensorsReader::~SafetensorsReader() { ::close(fd_); }

std::vector<std::string> SafetensorsReader::names() const {
  std::vector<std::string> out;
  for (const auto& [name, e] : entries_) out.push_back(name);
  return out;
}

const Shape& SafetensorsReader::shape(const std::string& name) const {
  auto it = entries_.find(name);
  ARTEL_CHECK(it != entries_.end(), path_, " has no tensor ", name);
  return it->second.shape;
}

DType SafetensorsReader::dtype(const std::string& name) const {
  auto it = entries_.find(name);
  ARTEL_CHECK(it != entries_.end(), path_, " has no tensor ", name);
  return it->second.dtype;
}

Tensor SafetensorsReader::read(const std::string& name) const {
  auto it = entries_.find(name);
  ARTEL_CHECK(it != entries_.end(), path_, " has no tensor ", name);
  const Entry& e = it->second;
  Tensor t = Tensor::empty(e.shape, e.dtype);
  read_at(fd_, static_cast<char*>(t.raw()), e.end - e.begin, data_start_ + e.begin, path_);
  return t;
}

void write_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  SafetensorsWriter w(path, layout_of(tensors), metadata);
  for (const auto& [name, t] : tensors) w.write(name, t);
  w.commit();
}

SafetensorsFile read_safetensors(const std::string& path) {
  return decode_safetensors(read_regular_file(path, "safetensors file"), path);
}

void save_weights(const Module& module, const std::string& path, const std::map<std::string, std::string>& metadata) {
  // state_dict() leaves out what has no value (a shard's part held elsewhere):
  // a whole module not yet materialised was written as a file of no tensors.
  for (const DeclaredParameter& d : module.declared_parameters())
    ARTEL_CHECK(d.param.value().defined(), "save_weights ", path, ": parameter '", d.name,
                "' has no value: it was declared but not materialised (hint: nn::materialize the model first)");
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
