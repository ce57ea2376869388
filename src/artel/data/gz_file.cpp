#include "artel/data/gz_file.h"

#include <zlib.h>

#include <cerrno>
#include <cstring>

#include "artel/core/error.h"
#include "artel/core/regular_file.h"

namespace artel::data {

namespace {

// Closes the gz handle on every path out, errors included.
struct GzCloser {
  gzFile f;
  ~GzCloser() {
    if (f) gzclose(f);
  }
};

std::string gz_error_text(gzFile f, const std::string& path) {
  int code = Z_OK;
  const char* msg = gzerror(f, &code);
  if (code == Z_ERRNO) return std::strerror(errno);
  std::string text = msg && *msg ? msg : "unknown zlib error";
  // zlib prefixes the path; the caller names it already.
  if (text.rfind(path + ": ", 0) == 0) text.erase(0, path.size() + 2);
  return text;
}

}  // namespace

std::vector<uint8_t> read_gz_file(const std::string& path) {
  check_regular_file(path, "data file", "check the path passed to --data");
  errno = 0;
  GzCloser gz{gzopen(path.c_str(), "rb")};
  if (!gz.f)
    throw Error("cannot open data file " + path + ": " + (errno ? std::strerror(errno) : "zlib could not open it"),
                "check the file's permissions");
  gzbuffer(gz.f, 1 << 17);
  std::vector<uint8_t> out;
  uint8_t chunk[1 << 16];
  for (;;) {
    int n = gzread(gz.f, chunk, sizeof chunk);
    if (n < 0) break;
    out.insert(out.end(), chunk, chunk + n);
    if (n == 0) break;
  }
  // A truncated stream returns what it could and sets "unexpected end of file".
  int code = Z_OK;
  gzerror(gz.f, &code);
  if (code != Z_OK)
    throw Error("cannot read data file " + path + ": " + gz_error_text(gz.f, path) + " (truncated or corrupt gzip?)",
                "download the file again");
  return out;
}

}  // namespace artel::data
