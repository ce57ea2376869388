// ProcessGroup behaviour over the thread backend: asynchrony, subgroups,
// timeouts that name the missing ranks, debug-mode divergence, bad input.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <future>
#include <mutex>

#include "artel/comm/algorithms.h"
#include "artel/comm/thread_group.h"
#include "artel/core/shm_names.h"
#include "comm/quick_options.h"

namespace artel::comm {
namespace {

using ::testing::HasSubstr;

using artel_test::quick;

// A countdown the test threads use to hold a rank back without sleeping.
class Latch {
 public:
  explicit Latch(int n) : n_(n) {}
  void arrive() {
    std::lock_guard lock(mu_);
    if (--n_ <= 0) cv_.notify_all();
  }
  void wait() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return n_ <= 0; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int n_;
};

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ProcessGroup, RankSizeAndOpsInIssueOrder) {
  spawn_threads(3, [](ProcessGroup& pg) {
    EXPECT_EQ(pg.size(), 3);
    EXPECT_EQ(pg.name(), "world");
    std::vector<Tensor> ts;
    std::vector<WorkPtr> works;
    for (int k = 0; k < 20; ++k) {  // queued without waiting; each sees the previous result
      ts.push_back(Tensor::full({5}, 1.f));
      works.push_back(pg.all_reduce(ts.back()));
    }
    for (auto& w : works) w->wait();
    for (auto& t : ts) EXPECT_EQ(t.to_vector()[4], 3.f);
    Tensor chain = Tensor::full({4}, 1.f);
    auto w1 = pg.all_reduce(chain), w2 = pg.all_reduce(chain);  // same tensor twice: 3 then 9
    w2->wait();
    EXPECT_TRUE(w1->completed());
    EXPECT_EQ(chain.to_vector()[0], 9.f);
  }, quick());
}

// A subgroup's errors named its own ranks only ("rank 1" of world/[1,3]):
// under a parameter server's pair groups, a rank nobody could find.
TEST(ProcessGroup, ASubgroupsErrorsNameWorldRanksToo) {
  std::promise<void> timed_out;
  std::shared_future<void> seen = timed_out.get_future().share();
  GroupOptions o = quick();
  o.debug_checks = true;
  spawn_threads(4, [&](ProcessGroup& pg) {
    auto odd = pg.new_group({1, 3});
    if (!odd) return;
    // For the timeout (odd is unusable after its error); rank 3 never issues on it.
    auto again = pg.new_group({1, 3}, {.timeout = std::chrono::milliseconds(300)});
    Tensor t = Tensor::zeros({pg.rank() == 1 ? 4 : 5});
    std::string said;
    try {
      odd->all_reduce(t)->wait();
    } catch (const Error& e) {
      said = e.what();
    }
    EXPECT_THAT(said, HasSubstr("rank 1 (world rank 3) issued all_reduce")) << said;
    if (pg.rank() == 3) return seen.wait();  // stays in the group until the other has timed out
    try {
      again->all_reduce(t)->wait();
    } catch (const Error& e) {
      said = e.what();
    }
    timed_out.set_value();
    EXPECT_THAT(said, HasSubstr("waiting for rank(s) [1] (world rank(s) [3]) which did not arrive")) << said;
  }, o);
}

TEST(ProcessGroup, SubgroupsWorkAtTheSameTime) {
  spawn_threads(4, [](ProcessGroup& pg) {
    const int r = pg.rank();
    auto even = pg.new_group({0, 2});
    auto odd = pg.new_group({1, 3});
    auto row = pg.new_group({r < 2 ? 0 : 2, r < 2 ? 1 : 3});
    auto& mine = r % 2 == 0 ? even : odd;
    ASSERT_TRUE(mine);
    EXPECT_EQ((r % 2 == 0 ? odd : even), nullptr);
    EXPECT_EQ(mine->size(), 2);
    EXPECT_EQ(mine->rank(), r / 2);
    EXPECT_THAT(mine->name(), HasSubstr(r % 2 == 0 ? "world/[0,2]" : "world/[1,3]"));
    Tensor a = Tensor::full({1000}, static_cast<float>(r)), b = Tensor::full({7}, 1.f), c = Tensor::full({3}, 1.f);
    auto wa = mine->all_reduce(a), wb = row->all_reduce(b), wc = pg.all_reduce(c);
    wa->wait(), wb->wait(), wc->wait();
    EXPECT_EQ(a.to_vector()[999], r % 2 == 0 ? 2.f : 4.f);
    EXPECT_EQ(b.to_vector()[6], 2.f);
    EXPECT_EQ(c.to_vector()[2], 4.f);
    auto again = pg.new_group({0, 2});  // same list again: a new, separate group
    if (r % 2 == 0) {
      Tensor d = again->alloc({6});
      d.fill(1.f);
      again->all_reduce(d)->wait();
      EXPECT_EQ(d.to_vector()[5], 2.f);
    }
  }, quick());
}

// all_gather "shared" pushes each block into the peers' registered outputs
// when every output is registered and the blocks are small, pulls from
// registered inputs when only those are (or the blocks are large), and stages
// plain memory otherwise: every mix gives every rank every block, and no
// rank's input changes.
TEST(ProcessGroup, SharedAllGatherGathersWhicheverSideIsRegistered) {
  GroupOptions o = quick();
  o.registered_bytes = 64 << 20;  // room for 4 MiB blocks, pulled
  spawn_threads(3, [](ProcessGroup& pg) {
    const int r = pg.rank(), n = pg.size();
    for (int64_t count : {int64_t{5}, int64_t{1000}, int64_t{(4 << 20) / 4 + 1}})
      for (bool in_registered : {false, true})
        for (bool out_registered : {false, true}) {
          const std::string what = "count " + std::to_string(count) + (in_registered ? ", in" : ", plain in") +
                                   (out_registered ? ", out registered" : ", plain out");
          Tensor in = in_registered ? pg.alloc({count}) : Tensor::empty({count});
          Tensor out = out_registered ? pg.alloc({count * n}) : Tensor::empty({count * n});
          float* ip = in.data<float>();
          for (int64_t i = 0; i < count; ++i) ip[i] = static_cast<float>(r * 10000 + i % 10000);
          out.fill(-1.f);
          pg.all_gather(in, out, {"shared"})->wait();
          const float* op = out.data<float>();
          int64_t wrong = 0;
          for (int j = 0; j < n; ++j)
            for (int64_t i = 0; i < count; ++i) wrong += op[j * count + i] != static_cast<float>(j * 10000 + i % 10000);
          for (int64_t i = 0; i < count; ++i) wrong += ip[i] != static_cast<float>(r * 10000 + i % 10000);
          EXPECT_EQ(wrong, 0) << what;
        }
  }, o);
}

// The progress thread runs an op its issuer does not wait on, so a peer
// waiting on it is not stuck until the issuer gets round to waiting: rank 0
// waits on nothing until rank 1's all-reduce has returned.
TEST(ProcessGroup, OpNobodyWaitsOnStillCompletes) {
  Latch peer_done(1);
  spawn_threads(2, [&](ProcessGroup& pg) {
    Tensor t = Tensor::full({1000}, static_cast<float>(pg.rank() + 1));
    auto work = pg.all_reduce(t);
    if (pg.rank() == 1) {
      work->wait();
      peer_done.arrive();
    } else {
      peer_done.wait();
      work->wait();
    }
    EXPECT_EQ(t.to_vector()[999], 3.f);
  }, quick());
}

// A pipeline's sends must not wait for a receiver that is still computing:
// one that fits in the group's message buffer completes on the sender's
// thread; one that does not streams and completes only as the receiver reads.
TEST(ProcessGroup, SendThatFitsTheBufferCompletesWithoutItsReceiver) {
  Latch sent(1);
  spawn_threads(2, [&](ProcessGroup& pg) {
    auto link = pg.new_group({0, 1}, {.message_bytes = 1 << 20});
    ASSERT_TRUE(link);
    EXPECT_EQ(link->options().message_bytes, 1u << 20);
    const int64_t n = 64 << 10;  // 256 KiB: bigger than the world's 128 KiB buffer
    if (pg.rank() == 0) {
      for (int k = 0; k < 3; ++k)
        EXPECT_TRUE(link->send(Tensor::full({n}, static_cast<float>(k)), 1, k)->completed());
      auto streamed = pg.send(Tensor::full({n}, 7.f), 1);
      EXPECT_FALSE(streamed->completed());  // rank 1 has not started reading
      sent.arrive();
      streamed->wait();
      return;
    }
    sent.wait();
    Tensor got = Tensor::empty({n});
    for (int k = 2; k >= 0; --k) {  // by tag, in any order
      link->recv(got, 0, k)->wait();
      EXPECT_EQ(got.to_vector()[n - 1], static_cast<float>(k));
    }
    pg.recv(got, 0)->wait();
    EXPECT_EQ(got.to_vector()[0], 7.f);
  }, quick());
}

// A subgroup that only moves its callers' tensors (a parameter server's
// pairs) registers nothing: its segment holds no arena, yet its sends and
// receives work, and alloc() says the memory is used up.
TEST(ProcessGroup, SubgroupWithoutRegisteredMemoryStillSendsAndReceives) {
  spawn_threads(2, [&](ProcessGroup& pg) {
    auto link = pg.new_group({0, 1}, {.registered_bytes = 0});
    ASSERT_TRUE(link);
    EXPECT_EQ(link->options().registered_bytes, 0u);
    EXPECT_GT(pg.options().registered_bytes, 0u);  // the parent keeps its own
    EXPECT_THAT(error_of([&] { link->alloc({16}); }), HasSubstr("registered memory exhausted"));
    const int64_t n = 1 << 20;  // 4 MiB: through the message buffer in many hand-offs
    Tensor t = pg.rank() == 0 ? Tensor::full({n}, 5.f) : Tensor::zeros({n});
    if (pg.rank() == 0) link->send(t, 1)->wait();
    else link->recv(t, 0)->wait();
    EXPECT_EQ(t.to_vector()[n - 1], 5.f);
    auto sum = link->all_reduce(t);
    sum->wait();
    EXPECT_EQ(t.to_vector()[0], 10.f);
  }, quick());
}

TEST(ProcessGroup, TimeoutNamesOpSeqGroupAndMissingRank) {
  Latch both_failed(2);
  spawn_threads(3, [&](ProcessGroup& pg) {
    Tensor t = Tensor::full({16}, 1.f);
    pg.barrier()->wait();
    if (pg.rank() == 2) {  // does not call the all_reduce; stays alive until the others gave up
      both_failed.wait();
      return;
    }
    std::string err = error_of([&] { pg.all_reduce(t)->wait(std::chrono::milliseconds(300)); });
    both_failed.arrive();
    EXPECT_THAT(err, HasSubstr("all_reduce #2"));
    EXPECT_THAT(err, HasSubstr("'world'"));
    EXPECT_THAT(err, HasSubstr("rank(s) [2]"));
  }, quick());
}

TEST(ProcessGroup, WaitTimeoutWhileAnotherThreadRunsTheOpNamesMissingRank) {
  Latch done(2);
  spawn_threads(2, [&](ProcessGroup& pg) {
    if (pg.rank() == 1) {
      done.wait();
      return;
    }
    Tensor t = Tensor::full({4}, 1.f);
    auto w = pg.all_reduce(t);
    std::thread helper([&] { EXPECT_THROW(w->wait(std::chrono::milliseconds(400)), TimeoutError); });
    std::string err = error_of([&] { w->wait(std::chrono::milliseconds(200)); });
    helper.join();
    done.arrive(), done.arrive();
    EXPECT_THAT(err, HasSubstr("all_reduce #1"));
    EXPECT_THAT(err, HasSubstr("[1]"));
  }, quick());
}

TEST(ProcessGroup, RankThatLeftIsReportedNotWaitedFor) {
  std::string err;
  spawn_threads(2, [&](ProcessGroup& pg) {
    if (pg.rank() == 1) return;  // destroys its group at once
    Tensor t = Tensor::full({4}, 1.f);
    err = error_of([&] { pg.all_reduce(t)->wait(); });
  }, quick());
  EXPECT_THAT(err, HasSubstr("rank 1 left the group"));
}

TEST(ProcessGroup, DebugChecksNameTheDivergentRank) {
  GroupOptions o = quick();
  o.debug_checks = true;
  std::vector<std::string> errs(3);
  spawn_threads(3, [&](ProcessGroup& pg) {
    Tensor t = Tensor::full({pg.rank() == 1 ? 10 : 12}, 1.f);
    errs[pg.rank()] = error_of([&] { pg.all_reduce(t, {ReduceOp::sum, "ring"})->wait(); });
  }, o);
  for (const auto& e : errs) {
    EXPECT_THAT(e, HasSubstr("rank 1 issued all_reduce #1 of 10 float32"));
    EXPECT_THAT(e, HasSubstr("others issued all_reduce #1 of 12"));
  }
  spawn_threads(3, [&](ProcessGroup& pg) {  // a different op at the same sequence number
    Tensor t = Tensor::full({4}, 1.f);
    errs[pg.rank()] = error_of([&] { (pg.rank() == 2 ? pg.broadcast(t) : pg.all_reduce(t))->wait(); });
  }, o);
  EXPECT_THAT(errs[0], HasSubstr("rank 2 issued broadcast #1"));
}

TEST(ProcessGroup, SizeAndDtypeMismatchCaughtWithoutDebugMode) {
  std::vector<std::string> errs(2);
  spawn_threads(2, [&](ProcessGroup& pg) {
    Tensor t = Tensor::zeros({8}, pg.rank() == 0 ? DType::f32 : DType::i32);
    errs[pg.rank()] = error_of([&] { pg.all_reduce(t)->wait(); });
  }, quick());
  EXPECT_THAT(errs[0], HasSubstr("ranks disagree"));
  EXPECT_THAT(errs[1], HasSubstr("int32"));
  spawn_threads(2, [&](ProcessGroup& pg) {  // point-to-point algorithms: the message size gives it away
    Tensor t = Tensor::zeros({pg.rank() == 0 ? 8 : 9});
    errs[pg.rank()] = error_of([&] { pg.all_reduce(t, {ReduceOp::sum, "all_pairs"})->wait(); });
  }, quick());
  EXPECT_THAT(errs[0], HasSubstr("rank 1 sent 36 bytes where this rank expects 32"));
}

TEST(ProcessGroup, BadInputIsAClearError) {
  spawn_threads(2, [](ProcessGroup& pg) {
    Tensor t = Tensor::zeros({8});
    EXPECT_THAT(error_of([&] { pg.send(t, 2); }), HasSubstr("destination rank 2 is outside the group (size 2)"));
    EXPECT_THAT(error_of([&] { pg.recv(t, -1); }), HasSubstr("outside the group"));
    EXPECT_THAT(error_of([&] { pg.send(t, 1, -3); }), HasSubstr("tag must be >= 0"));
    EXPECT_THAT(error_of([&] { pg.broadcast(t, {.root = 5}); }), HasSubstr("root 5 is outside"));
    EXPECT_THAT(error_of([&] { pg.all_reduce(t, Tensor::zeros({7})); }), HasSubstr("`out` has 7 elements"));
    EXPECT_THAT(error_of([&] { pg.all_reduce(t, Tensor::zeros({8}, DType::f64)); }), HasSubstr("must match"));
    EXPECT_THAT(error_of([&] { pg.all_gather(t, Tensor::zeros({8})); }), HasSubstr("needs 2 times"));
    EXPECT_THAT(error_of([&] { pg.all_reduce(t, {ReduceOp::sum, "bogus"}); }), HasSubstr("unknown all_reduce algorithm 'bogus'"));
    EXPECT_THAT(error_of([&] { pg.all_reduce(Tensor()); }), HasSubstr("undefined"));
    EXPECT_THAT(error_of([&] { pg.new_group({0, 0}); }), HasSubstr("listed twice"));
    EXPECT_THAT(error_of([&] { pg.new_group({0, 9}); }), HasSubstr("outside the group"));
    auto w = pg.barrier();
    EXPECT_THAT(error_of([&] { w->wait(std::chrono::milliseconds(-1)); }), HasSubstr("must be >= 0"));
    w->wait();
    EXPECT_THAT(error_of([&] { pg.alloc({1 << 20}); }), HasSubstr("registered memory exhausted"));
  }, quick());
  GroupOptions o = quick();
  o.backend = "carrier-pigeon";
  o.job_id = "x";
  EXPECT_THAT(error_of([&] { init_process_group(o); }), HasSubstr("unknown communication backend 'carrier-pigeon'"));
  o.backend = "thread";
  o.timeout = Duration(0);
  EXPECT_THAT(error_of([&] { init_process_group(o); }), HasSubstr("timeout must be > 0"));
  o.timeout = Duration(1000);
  o.rank = 3, o.world_size = 2;
  EXPECT_THAT(error_of([&] { init_process_group(o); }), HasSubstr("rank 3 is outside the world of 2"));
  o.rank = 0, o.job_id = "bad/id";
  EXPECT_THAT(error_of([&] { init_process_group(o); }), HasSubstr("invalid job id"));
  o.job_id = "tiny-ring", o.rank = 0, o.world_size = 1, o.message_bytes = 16;
  EXPECT_THAT(error_of([&] { init_process_group(o); }), HasSubstr("message_bytes must be >= 64, got 16"));
  EXPECT_THAT(error_of([] { parse_reduce_op("mean"); }), HasSubstr("unknown reduce op 'mean'"));
}

TEST(ProcessGroup, RendezvousTimesOutNamingMissingRank) {
  GroupOptions o = quick();
  o.backend = "thread", o.job_id = "lonely", o.world_size = 2, o.timeout = Duration(200);
  EXPECT_THAT(error_of([&] { init_process_group(o); }), HasSubstr("rank(s) [1]"));
  o.rank = 1, o.job_id = "lonely2";
  EXPECT_THAT(error_of([&] { init_process_group(o); }), HasSubstr("did not appear before the timeout: rank 0 (which creates it) had not created it"));
}

// A segment rank 0 has made but not yet initialised when the timeout ends
// (a timeout far too short for starting): the message says the timeout ran
// out, and how long it was, not that rank 0 failed.
TEST(ProcessGroup, AnUninitialisedSegmentTimesOutNamingTheTimeout) {
  const std::string job = "halfmade-" + std::to_string(::getpid());
  const std::string name = artel::shm_job_name(job);
  const int fd = ::shm_open(name.c_str(), O_CREAT | O_RDWR, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, 1 << 16), 0);  // sized, its header still zero: rank 0 is busy making it
  ::close(fd);
  GroupOptions o = quick();
  o.backend = "shm", o.job_id = job, o.rank = 1, o.world_size = 2, o.timeout = Duration(200);
  EXPECT_THAT(error_of([&] { init_process_group(o); }),
              HasSubstr("segment " + name + " was not initialised by rank 0 within the timeout (0.2 s) (hint: check "
                        "rank 0's output; if it was only slow to start, raise the timeout (--timeout))"));
  ::shm_unlink(name.c_str());
}

TEST(ProcessGroup, ErrorBreaksTheGroupForLaterOps) {
  std::vector<std::string> errs(2);
  spawn_threads(2, [&](ProcessGroup& pg) {
    Tensor t = Tensor::zeros({pg.rank() == 0 ? 4 : 5});
    auto bad = pg.all_reduce(t);
    auto next = pg.barrier();
    EXPECT_THROW(bad->wait(), Error);
    errs[pg.rank()] = error_of([&] { next->wait(); });
  }, quick());
  EXPECT_THAT(errs[0], HasSubstr("unusable after an earlier error"));
}

TEST(ProcessGroup, AlgorithmsOnEveryOpAreListed) {
  for (OpKind k : {OpKind::all_reduce, OpKind::broadcast, OpKind::reduce, OpKind::all_gather, OpKind::reduce_scatter,
                   OpKind::all_to_all, OpKind::gather, OpKind::scatter, OpKind::barrier}) {
    int count = 0, p2p = 0;
    for (const auto& a : algorithms()) count += a.kind == k, p2p += a.kind == k && !a.needs_shared;
    EXPECT_GE(count, 1) << op_kind_name(k);
    EXPECT_GE(p2p, 1) << op_kind_name(k) << " must run without shared memory (mpi)";
  }
}

}  // namespace
}  // namespace artel::comm
