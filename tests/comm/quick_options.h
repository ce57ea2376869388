// Group options for the tests that run ranks on threads: a hang fails within
// 30 s even on 2 loaded cores, and a 1 MiB registered buffer is enough for
// every message they send.
#pragma once

#include <chrono>

#include "artel/comm/process_group.h"

namespace artel_test {

inline artel::comm::GroupOptions quick() {
  artel::comm::GroupOptions o;
  o.timeout = std::chrono::seconds(30);
  o.registered_bytes = 1 << 20;
  return o;
}

}  // namespace artel_test
