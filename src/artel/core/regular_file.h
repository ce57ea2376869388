// A file a user names on the command line (weights, a config, a token table,
// data): refused in one line, naming what it was for and the path, when it is
// missing or is not a regular file. A directory, a device such as /dev/zero
// (endless: read whole, it would fill memory) or a FIFO (a read that never
// returns) is never read whole. A streaming reader that stops at bad input
// (JSON) checks only that the path is no directory: bash's <(...) pipes work.
//
//   check_regular_file(path, "weights file", "pass a .safetensors file");
//   std::string bytes = read_regular_file(path, "token table", "pass llm.c's gpt2_tokenizer.bin");
#pragma once

#include <string>

namespace artel {

// Errors: "WHAT PATH does not exist", "WHAT PATH is a directory, not a file",
// each with `hint`. For a reader that streams and stops at bad input (a JSON
// parser), which may read a pipe, e.g. bash's <(...).
void check_file_path(const std::string& path, const std::string& what, const std::string& hint = "check the path");

// check_file_path, and "WHAT PATH is not a regular file" for anything else.
void check_regular_file(const std::string& path, const std::string& what, const std::string& hint = "check the path");

// Throws "cannot write WHAT PATH: REASON" unless a file can be created beside
// `path`: an output written at the end of a run (a trace, a calibration) is
// checked before the run rather than lost after it. A file is created and
// removed (as root a permission check passes where the file system still
// refuses: /proc, a read-only mount).
void check_writable(const std::string& path, const std::string& what);

// Where an output written atomically (a temporary file renamed over it)
// goes: `path`, or the file a symlink there leads to (the link stays, as
// when a program opens it). Throws "WHAT PATH is a directory / a device, a
// FIFO or a socket, not a regular file" otherwise: a rename over /dev/full
// or a FIFO, as root, replaced the device with a file.
std::string replaceable_file(const std::string& path, const std::string& what);

// The whole file, after check_regular_file; "cannot read WHAT PATH: REASON" otherwise.
std::string read_regular_file(const std::string& path, const std::string& what,
                              const std::string& hint = "check the path");

}  // namespace artel
