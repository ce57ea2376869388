// artel::Error — every failure a user can cause is one of these: what failed, where,
// and (when we know it) how to fix it. ARTEL_CHECK is the only macro for checks.
//
//   ARTEL_CHECK(n > 0, "--steps must be positive, got ", n);
//   throw Error("cannot open " + path, "check the path passed to --data");
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace artel {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what, std::string hint = "")
      : std::runtime_error(hint.empty() ? what : what + " (hint: " + hint + ")"),
        hint_(std::move(hint)) {}
  const std::string& hint() const { return hint_; }

 private:
  std::string hint_;
};

// A collective or receive that did not complete in time.
class TimeoutError : public Error {
 public:
  using Error::Error;
};

namespace detail {
template <class... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
}  // namespace detail

// "a, b, c and 4 more": a list of names in an error, kept to one line.
inline std::string name_list(const std::vector<std::string>& names, size_t shown = 8) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < shown; ++i) out.append(i ? ", " : "").append(names[i]);
  if (names.size() > shown) out.append(" and ").append(std::to_string(names.size() - shown)).append(" more");
  return out;
}

// ARTEL_CHECK with a hint: throws Error(what..., hint) unless `ok`.
template <class... Args>
void require(bool ok, const char* hint, const Args&... what) {
  if (!ok) throw Error(detail::concat(what...), hint);
}

}  // namespace artel

#define ARTEL_CHECK(cond, ...)                                      \
  do {                                                              \
    if (!(cond)) throw ::artel::Error(::artel::detail::concat(__VA_ARGS__)); \
  } while (0)
