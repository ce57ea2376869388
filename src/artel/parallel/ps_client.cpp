#include "artel/parallel/ps_client.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "artel/core/error.h"

namespace artel::parallel {

namespace {
constexpr int64_t kHeaderBytes = kHeaderWords * static_cast<int64_t>(sizeof(int64_t));
}  // namespace

PsClient::PsClient(comm::ProcessGroup& world, const PsRoles& roles, std::optional<int64_t> staleness,
                   comm::Duration patience)
    : roles_(roles), staleness_(staleness) {
  ARTEL_CHECK(!roles.is_server(world.rank()), "rank ", world.rank(), " is a server, not a worker (", roles.describe(), ")");
  pairs_ = ps_pair_groups(world, roles, patience);
  pushing_.resize(pairs_.size());
}

PsClient::~PsClient() {
  for (const comm::WorkPtr& w : pushing_)
    if (w && !w->completed()) {
      try {
        w->wait();
      } catch (const std::exception&) {
        // the push's server is gone; the error was (or will be) reported where it matters
      }
    }
}

template <class Fn>
void PsClient::with_server(int s, Fn&& fn) {
  try {
    fn(*pairs_[static_cast<size_t>(s)]);
  } catch (const std::exception& e) {
    throw Error("parameter server " + std::to_string(s) + " (rank " + std::to_string(roles_.server_rank(s)) +
                    "): " + e.what(),
                "a server holds part of every large tensor: the job cannot go on without it (--max-restarts "
                "restarts it from the last checkpoint)");
  }
}

void PsClient::start(const std::vector<PsParameter>& params, std::vector<Tensor> values, bool introduce) {
  ARTEL_CHECK(params.size() == values.size(), "parameter server: ", params.size(), " parameters but ", values.size(),
              " values");
  layout_ = std::make_unique<PsLayout>(params, roles_.servers);
  values_ = std::move(values);
  for (int s = 0; s < roles_.servers; ++s) buffers_.push_back(Tensor::zeros({layout_->elements[static_cast<size_t>(s)]}));
  if (!introduce) return;
  const std::string table = ps_table_text(params);
  for (int s = 0; s < roles_.servers; ++s) {
    Tensor& buf = buffers_[static_cast<size_t>(s)];
    for (const PsSegment& seg : layout_->segments[static_cast<size_t>(s)])
      std::memcpy(buf.data<float>() + seg.offset, values_[seg.param].data<float>() + seg.begin,
                  static_cast<size_t>(seg.end - seg.begin) * sizeof(float));
    with_server(s, [&](comm::ProcessGroup& pair) {
      ps_send_header(pair, 1, PsMessage::kHello, 0, static_cast<int64_t>(table.size()));
      pair.send(ps_words(table), 1)->wait();
      if (buf.numel() > 0) pair.send(buf, 1)->wait();
    });
    sent_ += kHeaderBytes + ps_word_count(static_cast<int64_t>(table.size())) * 8 + buf.numel() * 4;
  }
}

int64_t PsClient::required_view(int64_t clock) const {
  return staleness_ ? std::max<int64_t>(0, clock - *staleness_) : 0;
}

void PsClient::finish_pushes() {
  for (int s = 0; s < roles_.servers; ++s) {
    comm::WorkPtr& w = pushing_[static_cast<size_t>(s)];
    if (w) with_server(s, [&](comm::ProcessGroup&) { w->wait(); });
    w.reset();
  }
}

int64_t PsClient::pull(int64_t clock, int64_t required) {
  ARTEL_CHECK(layout_ != nullptr, "parameter server: pull before start()");
  finish_pushes();  // the buffers are free again
  for (int s = 0; s < roles_.servers; ++s)  // ask every server first: they answer at once
    with_server(s, [&](comm::ProcessGroup& pair) { ps_send_header(pair, 1, PsMessage::kPull, clock, required); });
  int64_t view = -1;
  for (int s = 0; s < roles_.servers; ++s) {
    Tensor& buf = buffers_[static_cast<size_t>(s)];
    with_server(s, [&](comm::ProcessGroup& pair) {
      std::vector<int64_t> h = ps_recv_header(pair, 1);
      ARTEL_CHECK(h[0] == static_cast<int64_t>(PsMessage::kValues), "expected values, got message kind ", h[0]);
      view = view < 0 ? h[1] : std::min(view, h[1]);
      if (buf.numel() > 0) pair.recv(buf, 1)->wait();
    });
    for (const PsSegment& seg : layout_->segments[static_cast<size_t>(s)])
      std::memcpy(values_[seg.param].data<float>() + seg.begin, buf.data<float>() + seg.offset,
                  static_cast<size_t>(seg.end - seg.begin) * sizeof(float));
    sent_ += kHeaderBytes;
    received_ += kHeaderBytes + buf.numel() * 4;
  }
  return view;
}

void PsClient::push(int64_t clock, double lr, int64_t staleness, const std::vector<Tensor>& grads) {
  ARTEL_CHECK(layout_ != nullptr && grads.size() == values_.size(), "parameter server: push of ", grads.size(),
              " gradients for ", values_.size(), " parameters");
  finish_pushes();
  for (int s = 0; s < roles_.servers; ++s) {
    Tensor& buf = buffers_[static_cast<size_t>(s)];
    for (const PsSegment& seg : layout_->segments[static_cast<size_t>(s)]) {
      float* dst = buf.data<float>() + seg.offset;
      const auto n = static_cast<size_t>(seg.end - seg.begin);
      if (grads[seg.param].defined()) std::memcpy(dst, grads[seg.param].data<float>() + seg.begin, n * sizeof(float));
      else std::fill(dst, dst + n, 0.0f);
    }
    with_server(s, [&](comm::ProcessGroup& pair) {
      ps_send_header(pair, 1, PsMessage::kPush, clock, std::bit_cast<int64_t>(lr), staleness);
      if (buf.numel() > 0) pushing_[static_cast<size_t>(s)] = pair.send(buf, 1);  // waited for at the next pull
    });
    sent_ += kHeaderBytes + buf.numel() * 4;
  }
}

std::vector<PsWorkerStats> PsClient::stats() {
  finish_pushes();
  std::vector<int64_t> words;
  with_server(0, [&](comm::ProcessGroup& pair) {
    ps_send_header(pair, 1, PsMessage::kStats);
    std::vector<int64_t> h = ps_recv_header(pair, 1);
    ARTEL_CHECK(h[0] == static_cast<int64_t>(PsMessage::kStatsReply), "expected statistics, got message kind ", h[0]);
    Tensor t = Tensor::zeros({std::max<int64_t>(1, h[1])}, DType::i64);
    pair.recv(t, 1)->wait();
    words.assign(t.data<int64_t>(), t.data<int64_t>() + h[1]);
  });
  return decode_ps_stats(words);
}

void PsClient::done(int64_t clock) {
  finish_pushes();
  for (int s = 0; s < roles_.servers; ++s)
    with_server(s, [&](comm::ProcessGroup& pair) { ps_send_header(pair, 1, PsMessage::kDone, clock); });
}

}  // namespace artel::parallel
