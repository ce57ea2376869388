#include "artel/core/regular_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "artel/core/error.h"

namespace artel {

namespace fs = std::filesystem;

void check_file_path(const std::string& path, const std::string& what, const std::string& hint) {
  if (path.empty()) throw Error(what + ": the path is empty", hint);
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (!fs::exists(st)) throw Error(what + " " + path + " does not exist", hint);
  if (fs::is_directory(st)) throw Error(what + " " + path + " is a directory, not a file", hint);
}

void check_regular_file(const std::string& path, const std::string& what, const std::string& hint) {
  check_file_path(path, what, hint);
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) throw Error(what + " " + path + " is not a regular file", hint);
}

void check_writable(const std::string& path, const std::string& what) {
  const std::string probe = path + ".probe-" + std::to_string(::getpid());
  const int fd = ::open(probe.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
  if (fd < 0)
    throw Error("cannot write " + what + " " + path + ": " + std::strerror(errno),
                "check that its folder exists and is writable");
  ::close(fd);
  ::unlink(probe.c_str());
}

std::string read_regular_file(const std::string& path, const std::string& what, const std::string& hint) {
  check_regular_file(path, what, hint);
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open " + what + " " + path + (errno ? ": " + std::string(std::strerror(errno)) : ""), hint);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw Error("cannot read " + what + " " + path, hint);
  return bytes;
}

}  // namespace artel
