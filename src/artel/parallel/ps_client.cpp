#include "artel/parallel/ps_client.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <iterator>

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
  touched_.assign(values_.size(), {});
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

void PsClient::send_rows(comm::ProcessGroup& pair, const std::vector<int64_t>& words) {
  if (words.empty()) return;
  Tensor t = Tensor::zeros({static_cast<int64_t>(words.size())}, DType::i64);
  std::copy(words.begin(), words.end(), t.data<int64_t>());
  pair.send(t, 1)->wait();
  sent_ += static_cast<int64_t>(words.size()) * 8;
}

int64_t PsClient::read(int s, PsSelection sel, const PsRowList& rows) {
  Tensor& buf = buffers_[static_cast<size_t>(s)];
  int64_t view = 0;
  with_server(s, [&](comm::ProcessGroup& pair) {
    std::vector<int64_t> h = ps_recv_header(pair, 1);
    ARTEL_CHECK(h[0] == static_cast<int64_t>(PsMessage::kValues), "expected values, got message kind ", h[0]);
    ARTEL_CHECK(h[2] >= 0 && h[2] <= buf.numel(), "a reply of ", h[2], " elements to a read of at most ", buf.numel());
    view = h[1];
    if (h[2] > 0) pair.recv(buf.slice0(0, h[2]), 1)->wait();
    received_ += kHeaderBytes + h[2] * 4;
  });
  const float* src = buf.data<float>();
  ps_walk(*layout_, s, sel, rows, [&](const PsSegment& seg, int64_t at, int64_t count, int64_t pos) {
    std::memcpy(values_[seg.param].data<float>() + seg.begin + at, src + pos, static_cast<size_t>(count) * sizeof(float));
  });
  return view;
}

int64_t PsClient::pull(int64_t clock, int64_t required, PsSelection sel) {
  ARTEL_CHECK(layout_ != nullptr, "parameter server: pull before start()");
  ARTEL_CHECK(sel.sparse != PsSparse::rows, "parameter server: rows are pulled with pull_rows");
  finish_pushes();  // the buffers are free again
  for (int s = 0; s < roles_.servers; ++s) {  // ask every server first: they answer at once
    with_server(s, [&](comm::ProcessGroup& pair) {
      ps_send_header(pair, 1, PsMessage::kPull, clock, required, sel.encode());
    });
    sent_ += kHeaderBytes;
  }
  int64_t view = -1;
  for (int s = 0; s < roles_.servers; ++s) {
    const int64_t v = read(s, sel, {});
    view = view < 0 ? v : std::min(view, v);
  }
  return view;
}

int64_t PsClient::pull_rows(int64_t clock, int64_t required, size_t param, const std::vector<int64_t>& rows) {
  ARTEL_CHECK(layout_ != nullptr && param < values_.size() && layout_->params[param].sparse,
              "parameter server: rows pulled of a parameter that is no sparse table");
  finish_pushes();
  const PsSelection sel{.dense = false, .sparse = PsSparse::rows};
  std::vector<PsRowList> lists(static_cast<size_t>(roles_.servers));
  for (int s = 0; s < roles_.servers; ++s) {
    PsRowList& list = lists[static_cast<size_t>(s)];
    list = ps_rows_for(*layout_, s, param, rows);
    if (std::all_of(list.begin(), list.end(), [](const auto& r) { return r.empty(); })) continue;
    const std::vector<int64_t> words = encode_ps_rows(list);
    with_server(s, [&](comm::ProcessGroup& pair) {
      ps_send_header(pair, 1, PsMessage::kPull, clock, required, sel.encode(), static_cast<int64_t>(words.size()));
      send_rows(pair, words);
    });
    sent_ += kHeaderBytes;
  }
  int64_t view = -1;
  for (int s = 0; s < roles_.servers; ++s) {
    const PsRowList& list = lists[static_cast<size_t>(s)];
    if (std::all_of(list.begin(), list.end(), [](const auto& r) { return r.empty(); })) continue;
    const int64_t v = read(s, sel, list);
    view = view < 0 ? v : std::min(view, v);
  }
  std::vector<int64_t>& kept = touched_[param];
  std::vector<int64_t> merged;
  std::set_union(kept.begin(), kept.end(), rows.begin(), rows.end(), std::back_inserter(merged));
  kept = std::move(merged);
  return view;
}

void PsClient::push(int64_t clock, double lr, int64_t staleness, const std::vector<Tensor>& grads) {
  ARTEL_CHECK(layout_ != nullptr && grads.size() == values_.size(), "parameter server: push of ", grads.size(),
              " gradients for ", values_.size(), " parameters");
  finish_pushes();
  const bool sparse = layout_->has_sparse();
  const PsSelection sel{.dense = true, .sparse = sparse ? PsSparse::rows : PsSparse::whole};
  for (int s = 0; s < roles_.servers; ++s) {
    PsRowList rows;
    if (sparse) {  // each sparse segment's rows come from its own table's touched rows
      rows.resize(ps_sparse_segments(*layout_, s).size());
      for (size_t p = 0; p < values_.size(); ++p) {
        if (!layout_->params[p].sparse) continue;
        PsRowList mine = ps_rows_for(*layout_, s, p, touched_[p]);
        for (size_t k = 0; k < mine.size(); ++k)
          if (!mine[k].empty()) rows[k] = std::move(mine[k]);
      }
    }
    Tensor& buf = buffers_[static_cast<size_t>(s)];
    float* dst = buf.data<float>();
    const int64_t n = ps_walk(*layout_, s, sel, rows, [&](const PsSegment& seg, int64_t at, int64_t count, int64_t pos) {
      const Tensor& g = grads[seg.param];
      if (g.defined()) std::memcpy(dst + pos, g.data<float>() + seg.begin + at, static_cast<size_t>(count) * sizeof(float));
      else std::fill(dst + pos, dst + pos + count, 0.0f);
    });
    const std::vector<int64_t> words = sparse ? encode_ps_rows(rows) : std::vector<int64_t>{};
    with_server(s, [&](comm::ProcessGroup& pair) {
      ps_send_header(pair, 1, PsMessage::kPush, clock, std::bit_cast<int64_t>(lr), staleness, sel.encode(),
                     static_cast<int64_t>(words.size()));
      send_rows(pair, words);
      if (n > 0) pushing_[static_cast<size_t>(s)] = pair.send(buf.slice0(0, n), 1);  // waited for at the next pull
    });
    sent_ += kHeaderBytes + n * 4;
  }
  for (std::vector<int64_t>& t : touched_) t.clear();
}

void PsClient::start_clock(int64_t clock) {
  for (int s = 0; s < roles_.servers; ++s)
    with_server(s, [&](comm::ProcessGroup& pair) { ps_send_header(pair, 1, PsMessage::kStart, clock); });
}

void PsClient::ask_every_server(PsMessage kind, int64_t step, const std::string& dir) {
  finish_pushes();
  for (int s = 0; s < roles_.servers; ++s)  // all at once: they write in parallel
    with_server(s, [&](comm::ProcessGroup& pair) {
      ps_send_header(pair, 1, kind, step, static_cast<int64_t>(dir.size()));
      ps_send_text(pair, 1, dir);
    });
  for (int s = 0; s < roles_.servers; ++s) {
    std::string problem;
    with_server(s, [&](comm::ProcessGroup& pair) {
      std::vector<int64_t> h = ps_recv_header(pair, 1);
      ARTEL_CHECK(h[0] == static_cast<int64_t>(PsMessage::kOutcome), "expected an outcome, got message kind ", h[0]);
      problem = ps_recv_text(pair, 1, h[2]);
      if (h[1] == 0 && problem.empty()) problem = "it failed without saying why";
    });
    if (!problem.empty())
      throw Error("parameter server " + std::to_string(s) + " (rank " + std::to_string(roles_.server_rank(s)) + ") " +
                  (kind == PsMessage::kCheckpoint ? "could not write" : "could not read") + " its shard of step " +
                  std::to_string(step) + ": " + problem);
  }
}

void PsClient::checkpoint(int64_t step, const std::string& dir) { ask_every_server(PsMessage::kCheckpoint, step, dir); }
void PsClient::restore(int64_t step, const std::string& dir) { ask_every_server(PsMessage::kRestore, step, dir); }

std::vector<PsWorkerStats> PsClient::stats() {
  finish_pushes();
  std::vector<int64_t> words;
  with_server(0, [&](comm::ProcessGroup& pair) {
    ps_send_header(pair, 1, PsMessage::kStats);
    words = ps_recv_words(pair, 1, PsMessage::kStatsReply, "statistics");
  });
  return decode_ps_stats(words);
}

int64_t PsClient::buffer_bytes() const {
  int64_t bytes = 0;
  for (const Tensor& b : buffers_) bytes += static_cast<int64_t>(b.nbytes());
  return bytes;
}

std::vector<PsServerMemory> PsClient::server_memory() {
  finish_pushes();
  std::vector<PsServerMemory> out;
  for (int s = 0; s < roles_.servers; ++s)
    with_server(s, [&](comm::ProcessGroup& pair) {
      ps_send_header(pair, 1, PsMessage::kMemory);
      out.push_back(PsServerMemory::decode(ps_recv_words(pair, 1, PsMessage::kMemoryReply, "a memory report")));
    });
  return out;
}

void PsClient::done(int64_t clock) {
  finish_pushes();
  for (int s = 0; s < roles_.servers; ++s)
    with_server(s, [&](comm::ProcessGroup& pair) { ps_send_header(pair, 1, PsMessage::kDone, clock); });
}

}  // namespace artel::parallel
