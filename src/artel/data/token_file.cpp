#include "artel/data/token_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "artel/core/error.h"
#include "artel/core/regular_file.h"
#include "artel/data/mapped_file_guard.h"

namespace artel::data {

namespace {

// A read-only mapping of a whole file, unmapped when the last holder goes.
struct Mapping {
  void* data = nullptr;
  size_t bytes = 0;
  std::unique_ptr<MappedFileGuard> guard;  // a file cut short under the run is named, not a bare "Bus error"
  ~Mapping() {
    guard.reset();
    if (data) ::munmap(data, bytes);
  }
};

std::shared_ptr<Mapping> map_file(const std::string& path) {
  check_regular_file(path, "token file", "pass nanoGPT's train.bin/val.bin or an llm.c .bin file");
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error("cannot open token file " + path + ": " + std::strerror(errno), "check the path");
  struct stat st{};
  auto m = std::make_shared<Mapping>();
  if (::fstat(fd, &st) == 0 && st.st_size > 0) {
    m->bytes = static_cast<size_t>(st.st_size);
    void* p = ::mmap(nullptr, m->bytes, PROT_READ, MAP_PRIVATE, fd, 0);
    const int err = errno;
    ::close(fd);
    if (p == MAP_FAILED) throw Error("cannot map token file " + path + ": " + std::strerror(err));
    m->data = p;
    m->guard = std::make_unique<MappedFileGuard>(p, m->bytes, "token file " + path);
    ::madvise(p, m->bytes, MADV_SEQUENTIAL);
  } else {
    ::close(fd);
  }
  return m;
}

}  // namespace

TokenFile open_token_file(const std::string& path, int64_t vocab_size) {
  ARTEL_CHECK(vocab_size >= 1 && vocab_size <= 65536, "a uint16 token file needs a vocabulary of 1 to 65536 ids, got ",
              vocab_size);
  std::shared_ptr<Mapping> m = map_file(path);
  const auto bytes = static_cast<int64_t>(m->bytes);
  if (bytes == 0) throw Error("token file " + path + " is empty", "pass a file of uint16 token ids");
  const auto* bytes_at = static_cast<const unsigned char*>(m->data);
  int32_t header[3] = {0, 0, 0};
  if (bytes >= kLlmcHeaderBytes) std::memcpy(header, bytes_at, sizeof header);
  else if (bytes >= 4) std::memcpy(header, bytes_at, 4);  // the magic alone: a header cut short is still llm.c's
  const bool fits = bytes >= kLlmcHeaderBytes && header[2] >= 0 &&
                    (header[1] == 1 ? 2 : 4) * static_cast<int64_t>(header[2]) == bytes - kLlmcHeaderBytes;
  TokenFile f;
  f.path = path;
  int64_t offset = 0, count = 0;
  if (header[0] == kLlmcMagic) {
    if (bytes < kLlmcHeaderBytes)
      throw Error("token file " + path + " has llm.c's magic but only " + std::to_string(bytes) +
                      " bytes, shorter than its " + std::to_string(kLlmcHeaderBytes) + "-byte header",
                  "the file is truncated: write it again");
    if (header[1] == 2)
      throw Error("token file " + path + " holds uint32 ids (llm.c version 2)", "artel reads uint16 ids (version 1)");
    if (header[1] != 1)
      throw Error("token file " + path + " has llm.c's magic but version " + std::to_string(header[1]),
                  "artel reads version 1 (uint16 ids)");
    if (header[2] < 0)
      throw Error("token file " + path + " has a negative token count (" + std::to_string(header[2]) +
                      ") in its llm.c header",
                  "the header is damaged: write the file again");
    if (!fits) {
      const int64_t promised = kLlmcHeaderBytes + 2 * static_cast<int64_t>(header[2]);
      throw Error("token file " + path + (bytes < promised ? " is truncated" : " is longer than its header says") +
                      ": its header promises " + std::to_string(header[2]) + " tokens (" + std::to_string(promised) +
                      " bytes), the file has " + std::to_string(bytes) + " bytes",
                  "write the file again");
    }
    f.layout = "llm.c";
    offset = kLlmcHeaderBytes;
    count = header[2];
  } else {
    if (fits && (header[1] == 1 || header[1] == 2))
      throw Error("token file " + path + " has an llm.c header with magic " + std::to_string(header[0]) +
                      " instead of " + std::to_string(kLlmcMagic),
                  "the file is damaged, or not llm.c's: write it again");
    if (bytes % 2 != 0)
      throw Error("token file " + path + " has an odd length (" + std::to_string(bytes) +
                      " bytes), so it is not uint16 ids",
                  "pass nanoGPT's train.bin/val.bin or an llm.c .bin file");
    f.layout = "nanoGPT";
    count = bytes / 2;
  }
  const auto* ids = reinterpret_cast<const uint16_t*>(bytes_at + offset);
  for (int64_t i = 0; i < count; ++i)
    if (ids[i] >= vocab_size)
      throw Error("token file " + path + ": token " + std::to_string(i) + " is " + std::to_string(ids[i]) +
                      ", outside the vocabulary of " + std::to_string(vocab_size),
                  "pass --vocab-size to match the tokenizer that wrote the file");
  f.tokens = TokenSplit(m, ids, count);
  return f;
}

}  // namespace artel::data
