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

std::string replaceable_file(const std::string& path, const std::string& what) {
  if (path.empty()) throw Error(what + ": the path is empty", "name a file to write");
  fs::path p = path;
  std::error_code ec;
  for (int hops = 0; fs::is_symlink(fs::symlink_status(p, ec)); ++hops) {
    if (hops == 40) throw Error(what + " " + path + " is a loop of symbolic links", "name a file to write");
    const fs::path target = fs::read_symlink(p, ec);
    p = target.is_absolute() ? target : p.parent_path() / target;
  }
  const fs::file_status st = fs::status(p, ec);
  if (fs::is_directory(st))
    throw Error(what + " " + path + " is a directory, not a file",
                "name a file to write inside it");  // weights, a trace, a costs file: no one example name fits
  if (fs::exists(st) && !fs::is_regular_file(st))
    throw Error(what + " " + path + " is a device, a FIFO or a socket, not a regular file",
                "name a regular file: it is written beside and renamed over, which would replace what is there");
  return p.string();
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
