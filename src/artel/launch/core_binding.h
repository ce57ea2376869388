// Which cores each worker is bound to (like mpirun's --bind-to core).
//
// Unbound, the kernel moves busy workers between cores and now and then lets
// two share one while another idles; in synchronous training every worker
// then waits for the one that was held back. When the workers' threads fit on
// the cores the launcher may use, worker r gets its own run of `threads`
// cores; when they do not fit, nobody is bound (binding would only stack
// workers on the same cores). Binding is asked for (--bind-to core): a bound
// worker cannot escape anything else that runs on its core (docs/LAUNCH.md).
//
//   core_binding(2, 1, {0, 1})  ->  {{0}, {1}}
//   core_binding(4, 1, {0, 1})  ->  {{}, {}, {}, {}}   // oversubscribed: unbound
#pragma once

#include <vector>

namespace artel::launch {

// One list of core ids per worker; an empty list means "not bound".
std::vector<std::vector<int>> core_binding(int nproc, int threads, const std::vector<int>& allowed);

}  // namespace artel::launch
