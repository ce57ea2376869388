// CountedTransport: a transport that counts the bytes of every point-to-point
// message it carries — a collective's steps (a ring's, a tree's) and the
// user's send and recv alike — and hands everything to the transport it
// wraps. Every ProcessGroup's transport is wrapped (ProcessGroup::bytes_sent),
// so what an algorithm puts on the wire is measured, not computed.
// Direct-read shared-memory algorithms (shm, thread) move data without
// messages: they count nothing here.
//
//   auto t = std::make_shared<CountedTransport>(make_shm_transport(opts));
//   run_collective(*t, ring_all_reduce, ctx);
//   t->bytes_sent();   // 2(n−1)/n of the buffer
#pragma once

#include <atomic>
#include <memory>

#include "artel/comm/transport.h"

namespace artel::comm {

class CountedTransport : public Transport {
 public:
  explicit CountedTransport(std::unique_ptr<Transport> inner) : inner_(std::move(inner)) {}
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  void send(int dst, Tag tag, const void* data, size_t nbytes, const OpContext& ctx) override;
  void recv(int src, Tag tag, void* data, size_t nbytes, const OpContext& ctx) override;
  void send_recv(int dst, Tag send_tag, const void* send_data, size_t send_bytes, int src, Tag recv_tag,
                 void* recv_data, size_t recv_bytes, const OpContext& ctx) override;
  bool try_send(int dst, Tag tag, const void* data, size_t nbytes, const OpContext& ctx) override;
  void enter(uint64_t seq) override { inner_->enter(seq); }
  std::vector<int> missing(uint64_t seq) const override { return inner_->missing(seq); }
  void abort() override { inner_->abort(); }
  void end_job_on_failure() override { inner_->end_job_on_failure(); }
  // The subgroup's transport, unwrapped (its own group wraps it).
  std::unique_ptr<Transport> split(const std::vector<int>& ranks, const std::string& id,
                                   const GroupOptions& opts) override {
    return inner_->split(ranks, id, opts);
  }
  Tensor alloc(const Shape& shape, DType dtype) override { return inner_->alloc(shape, dtype); }
  SharedMemory* shared() override { return inner_->shared(); }
  NativeCollectives* native() override { return inner_->native(); }
  // The hierarchy's host-local and cross-host steps go around this counter, as native collectives do;
  // ProcessGroup::bytes_sent adds what the hierarchy counts across hosts.
  Hierarchy* hierarchy() override { return inner_->hierarchy(); }
  bool spans_hosts() const override { return inner_->spans_hosts(); }

  int64_t bytes_sent() const { return sent_.load(std::memory_order_relaxed); }
  int64_t bytes_received() const { return received_.load(std::memory_order_relaxed); }

 private:
  void count(std::atomic<int64_t>& n, size_t bytes) { n.fetch_add(static_cast<int64_t>(bytes), std::memory_order_relaxed); }

  std::unique_ptr<Transport> inner_;
  std::atomic<int64_t> sent_{0}, received_{0};
};

}  // namespace artel::comm
