// Test helper: the message of the artel::Error a callable throws, "" if none.
#pragma once

#include <string>

#include "artel/core/error.h"

namespace artel::data::testing {

template <class Fn>
std::string error_of(Fn fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace artel::data::testing
