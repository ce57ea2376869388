#include "artel/train/checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "artel/core/regular_file.h"
#include "artel/train/checkpoint_format.h"

namespace artel::train {
namespace {

using nlohmann::json;

std::string sys_error(const std::string& what, const std::string& path) {
  return what + " " + path + ": " + std::strerror(errno);
}

std::string dir_of(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// Closes the descriptor on every path out (and unlinks the file while armed).
struct FileGuard {
  int fd = -1;
  std::string unlink_path;
  ~FileGuard() {
    if (fd >= 0) ::close(fd);
    if (!unlink_path.empty()) ::unlink(unlink_path.c_str());
  }
};

void write_zeros(int fd, uint64_t n, const std::string& path) {
  static const char zeros[kCheckpointAlign] = {};
  write_all(fd, zeros, n, path);  // n < 64: only alignment padding
}

// Reads exactly n bytes at `offset`; a short read means the file is shorter
// than its size said (it shrank while being read).
void read_at(int fd, void* out, uint64_t n, uint64_t offset, const std::string& path) {
  char* p = static_cast<char*>(out);
  while (n > 0) {
    ssize_t r = ::pread(fd, p, std::min<uint64_t>(n, 1u << 30), static_cast<off_t>(offset));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw Error(sys_error("cannot read checkpoint", path));
    if (r == 0) checkpoint_corrupt(path, "truncated while reading");
    p += r;
    n -= static_cast<uint64_t>(r);
    offset += static_cast<uint64_t>(r);
  }
}

void write_body(int fd, const CheckpointPlan& plan, const Checkpoint& ck, const std::string& tmp) {
  write_all(fd, plan.head.data(), plan.head.size(), tmp);
  uint64_t at = plan.head.size();
  for (size_t i = 0; i < plan.table.size(); ++i) {
    const CheckpointTensorInfo& info = plan.table[i];
    write_zeros(fd, info.offset - at, tmp);
    write_all(fd, ck.tensors[i].second.raw(), info.nbytes, tmp);
    at = info.offset + info.nbytes;
  }
  write_zeros(fd, plan.data_start + plan.data_bytes - at, tmp);
  char trailer[kCheckpointTrailerBytes] = {};
  std::memcpy(trailer, &plan.head_crc, 4);
  std::memcpy(trailer + 8, kCheckpointEndMagic, 8);
  write_all(fd, trailer, sizeof trailer, tmp);
}

// An open checkpoint whose prefix, trailer and header passed every check.
struct OpenedCheckpoint {
  FileGuard file;
  CheckpointHeader header;
};

void open_checkpoint(const std::string& path, OpenedCheckpoint& out) {
  out.file.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (out.file.fd < 0) throw Error(sys_error("cannot open checkpoint", path), "check the path");
  int fd = out.file.fd;
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw Error(sys_error("cannot stat checkpoint", path));
  uint64_t size = static_cast<uint64_t>(st.st_size);
  uint64_t min_size = kCheckpointPrefixBytes + kCheckpointTrailerBytes;
  if (size < kCheckpointPrefixBytes) checkpoint_corrupt(path, "truncated: only " + std::to_string(size) + " bytes");

  char prefix[kCheckpointPrefixBytes];
  read_at(fd, prefix, sizeof prefix, 0, path);
  if (std::memcmp(prefix, kCheckpointMagic, 8) != 0)
    throw Error("checkpoint " + path + ": bad magic, not an artel checkpoint",
                "checkpoints are the ckpt-*.artel files written by `artel train --checkpoint-every`");
  uint32_t version;
  uint64_t n;
  std::memcpy(&version, prefix + 8, 4);
  std::memcpy(&n, prefix + 12, 8);
  if (version != kCheckpointFormatVersion)
    throw Error("checkpoint " + path + ": unsupported format version " + std::to_string(version) +
                    " (this build reads version " + std::to_string(kCheckpointFormatVersion) + ")",
                "resume with the artel version that wrote it");
  if (size < min_size || n > size - min_size)
    checkpoint_corrupt(path, "truncated: " + std::to_string(size) + " bytes cannot hold a header of " +
                                 std::to_string(n) + " bytes");

  char trailer[kCheckpointTrailerBytes];
  read_at(fd, trailer, sizeof trailer, size - sizeof trailer, path);
  if (std::memcmp(trailer + 8, kCheckpointEndMagic, 8) != 0)
    checkpoint_corrupt(path, "truncated: the closing magic is missing (the write did not finish)");
  std::string head(kCheckpointPrefixBytes + n, '\0');
  std::memcpy(head.data(), prefix, sizeof prefix);
  read_at(fd, head.data() + sizeof prefix, n, sizeof prefix, path);
  uint32_t stored_crc, crc = checkpoint_crc32(head.data(), head.size());
  std::memcpy(&stored_crc, trailer, 4);
  if (crc != stored_crc) checkpoint_corrupt(path, "header CRC mismatch");
  uint64_t data_start = align_up(head.size(), kCheckpointAlign);
  out.header = decode_checkpoint_header(path, head.substr(kCheckpointPrefixBytes), version, data_start, size);
  out.header.header_crc = crc;
  out.header.file_bytes = size;
}

Tensor read_tensor(int fd, const CheckpointTensorInfo& info, const std::string& path) {
  Tensor t = Tensor::empty(info.shape, info.dtype);
  read_at(fd, t.raw(), info.nbytes, info.offset, path);
  if (checkpoint_crc32(t.raw(), info.nbytes) != info.crc32)
    checkpoint_corrupt(path, "tensor '" + info.name + "' CRC mismatch (its data is corrupt)");
  return t;
}

}  // namespace

void write_all(int fd, const void* data, uint64_t n, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd, p, std::min<uint64_t>(n, 1u << 30));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) throw Error(sys_error("cannot write", path), "check free disk space");
    p += w;
    n -= static_cast<uint64_t>(w);
  }
}

void write_atomically(const std::string& given, const std::function<void(int fd, const std::string& tmp)>& body) {
  const std::string path = replaceable_file(given, "output file");  // a link's target; never a device or a FIFO
  std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  FileGuard file;
  file.fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (file.fd < 0) throw Error(sys_error("cannot create", tmp), "check that the directory exists and is writable");
  file.unlink_path = tmp;
  body(file.fd, tmp);
  if (::fsync(file.fd) != 0) throw Error(sys_error("cannot fsync", tmp));
  if (::rename(tmp.c_str(), path.c_str()) != 0) throw Error(sys_error("cannot rename " + tmp + " onto", path));
  file.unlink_path.clear();  // it is `path` now
  // The rename is durable only once the directory entry is.
  int dfd = ::open(dir_of(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) throw Error(sys_error("cannot open directory of", path));
  int rc = ::fsync(dfd);
  ::close(dfd);
  if (rc != 0) throw Error(sys_error("cannot fsync directory of", path));
}

bool Checkpoint::has(const std::string& name) const {
  for (const auto& [n, t] : tensors)
    if (n == name) return true;
  return false;
}

const Tensor& Checkpoint::get(const std::string& name) const {
  for (const auto& [n, t] : tensors)
    if (n == name) return t;
  throw Error("checkpoint " + (path.empty() ? std::string("(in memory)") : path) + ": missing tensor '" + name + "'",
              "it was written by a run with other parameters or optimizer; start a fresh run or pick its checkpoint");
}

void Checkpoint::restore(const std::string& name, Tensor& dst) const {
  const Tensor& src = get(name);
  if (src.dtype() != dst.dtype() || src.shape() != dst.shape())
    throw Error("checkpoint " + (path.empty() ? std::string("(in memory)") : path) + ": tensor '" + name + "' is " +
                    dtype_name(src.dtype()) + " " + shape_str(src.shape()) + ", the run expects " +
                    dtype_name(dst.dtype()) + " " + shape_str(dst.shape()),
                "the checkpoint belongs to a different model configuration");
  dst.copy_from(src);
}

void write_checkpoint(const std::string& path, const Checkpoint& ck) {
  const CheckpointPlan plan = plan_checkpoint(ck, path);
  write_atomically(path, [&](int fd, const std::string& tmp) { write_body(fd, plan, ck, tmp); });
}

CheckpointHeader read_checkpoint_header(const std::string& path) {
  OpenedCheckpoint opened;
  open_checkpoint(path, opened);
  return std::move(opened.header);
}

Checkpoint read_checkpoint(const std::string& path) {
  OpenedCheckpoint opened;
  open_checkpoint(path, opened);
  CheckpointHeader& h = opened.header;
  Checkpoint ck;
  ck.step = h.step;
  ck.sampler_position = h.sampler_position;
  ck.meta = std::move(h.meta);
  ck.rng = std::move(h.rng);
  ck.path = path;
  for (const CheckpointTensorInfo& info : h.tensors) ck.add(info.name, read_tensor(opened.file.fd, info, path));
  return ck;
}

CheckpointFile::CheckpointFile(std::string path) : path_(std::move(path)) {
  OpenedCheckpoint opened;
  open_checkpoint(path_, opened);
  header_ = std::move(opened.header);
  std::swap(fd_, opened.file.fd);  // kept open: the guard closes nothing
}

CheckpointFile::~CheckpointFile() {
  if (fd_ >= 0) ::close(fd_);
}

const CheckpointTensorInfo* CheckpointFile::find(const std::string& name) const {
  for (const CheckpointTensorInfo& info : header_.tensors)
    if (info.name == name) return &info;
  return nullptr;
}

Tensor CheckpointFile::read(const std::string& name) const {
  const CheckpointTensorInfo* info = find(name);
  if (!info) checkpoint_corrupt(path_, "no tensor '" + name + "'");
  return read_tensor(fd_, *info, path_);
}

json Compatibility::to_meta() const {
  json meta = {{"model_kind", model_kind}, {"model_config", model_config}};
  if (!parameters.empty()) meta["parameters"] = parameters;
  if (!optimizer.empty()) meta["optimizer"] = optimizer;
  if (!parameters.empty()) meta["buffers"] = buffers;  // even none: a record that buffers are kept
  return meta;
}

}  // namespace artel::train
