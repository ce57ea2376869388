// ProcessGroup::bytes_sent measures what an algorithm's messages carry: the
// ring all-reduce sends 2(n−1)/n of the buffer from each rank (the figure a
// parameter server's push-and-pull is compared with), a send its bytes.
#include <gtest/gtest.h>

#include <chrono>
#include <vector>

#include "artel/comm/process_group.h"
#include "artel/comm/thread_group.h"

namespace artel::comm {
namespace {

TEST(CountedTransport, RingAllReduceSendsTwiceNMinusOneOverNOfTheBuffer) {
  constexpr int kRanks = 4;
  constexpr int64_t kCount = 1 << 16;  // divisible by 4: equal parts
  std::vector<int64_t> sent(kRanks), received(kRanks);
  GroupOptions opts;
  opts.timeout = std::chrono::seconds(120);
  spawn_threads(kRanks, [&](ProcessGroup& pg) {
    Tensor t = Tensor::full({kCount}, 1.0f);
    const int64_t s0 = pg.bytes_sent(), r0 = pg.bytes_received();
    pg.all_reduce(t, {.algorithm = "ring"})->wait();
    sent[static_cast<size_t>(pg.rank())] = pg.bytes_sent() - s0;
    received[static_cast<size_t>(pg.rank())] = pg.bytes_received() - r0;
    if (pg.rank() == 0) pg.send(Tensor::zeros({10}), 1)->wait();
    if (pg.rank() == 1) pg.recv(Tensor::zeros({10}), 0)->wait();
    if (pg.rank() == 1) received[1] = pg.bytes_received() - r0;
  }, opts);
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(sent[static_cast<size_t>(r)], 2 * (kRanks - 1) * kCount * 4 / kRanks) << "rank " << r;
    if (r != 1) {
      EXPECT_EQ(received[static_cast<size_t>(r)], sent[static_cast<size_t>(r)]) << "rank " << r;
    }
  }
  EXPECT_EQ(received[1], sent[1] + 40);  // and the 10 floats of rank 0's send
}

}  // namespace
}  // namespace artel::comm
