// A file read through a memory map (a token file) that shrinks while the run
// reads it raises SIGBUS at the first page past its new end: the process died
// with "Bus error" and no word of which file. Each mapping is registered; a
// SIGBUS inside one writes one line naming the file and exits 1, and any
// other SIGBUS gets the default action, as before.
//
//   MappedFileGuard guard(data, bytes, "token file " + path);  // while mapped
#pragma once

#include <cstddef>
#include <string>

namespace artel::data {

class MappedFileGuard {
 public:
  // `what` names the file in the line ("token file train.bin").
  MappedFileGuard(const void* data, size_t bytes, const std::string& what);
  ~MappedFileGuard();
  MappedFileGuard(const MappedFileGuard&) = delete;
  MappedFileGuard& operator=(const MappedFileGuard&) = delete;

 private:
  int slot_ = -1;  // -1: every slot was taken (the file is then not named)
};

}  // namespace artel::data
