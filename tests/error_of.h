// The message of the artel::Error a callable throws, "" when it throws none:
// what a test of a refusal compares.
//
//   EXPECT_EQ(error_of([&] { parse(bad); }), "f.json: \"name\" must be a string, got number 5");
#pragma once

#include <functional>
#include <string>

#include "artel/core/error.h"

namespace artel::test_support {

inline std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace artel::test_support
