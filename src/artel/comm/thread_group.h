// Ranks as threads: the "thread" backend runs every rank of a group in this
// process, over the same shared-memory transport as "shm" but in ordinary
// memory — so plain ctest exercises the distributed code (gloo's test
// `spawn`). spawn_threads starts N ranks, waits for all, and rethrows the first
// error any rank raised.
//
//   comm::spawn_threads(4, [](comm::ProcessGroup& pg) {
//     Tensor t = Tensor::full({8}, 1.f);
//     pg.all_reduce(t)->wait();          // every element is now 4
//   });
#pragma once

#include <functional>

#include "artel/comm/process_group.h"

namespace artel::comm {

// Runs fn on `n` threads, each with its rank's group of backend "thread";
// `base` supplies the other options (timeout, debug_checks, sizes).
void spawn_threads(int n, const std::function<void(ProcessGroup&)>& fn, GroupOptions base = {});

}  // namespace artel::comm
