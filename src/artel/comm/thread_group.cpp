#include "artel/comm/thread_group.h"

#include <unistd.h>

#include <atomic>
#include <exception>
#include <thread>
#include <vector>

namespace artel::comm {

void spawn_threads(int n, const std::function<void(ProcessGroup&)>& fn, GroupOptions base) {
  ARTEL_CHECK(n >= 1, "spawn_threads: need at least one rank, got ", n);
  static std::atomic<int> counter{0};
  base.backend = "thread";
  base.world_size = n;
  base.job_id = "spawn-" + std::to_string(getpid()) + "-" + std::to_string(counter++);
  std::vector<std::exception_ptr> errors(n);
  std::vector<int> order(n, 0);
  std::atomic<int> next{1};
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        GroupOptions opts = base;
        opts.rank = r;
        auto pg = init_process_group(opts);
        fn(*pg);
      } catch (...) {
        errors[r] = std::current_exception();
        order[r] = next++;
      }
    });
  }
  for (auto& t : threads) t.join();
  // The first error is the cause; later ones are usually peers noticing it.
  int first = -1;
  for (int r = 0; r < n; ++r)
    if (errors[r] && (first < 0 || order[r] < order[first])) first = r;
  if (first >= 0) std::rethrow_exception(errors[first]);
}

}  // namespace artel::comm
