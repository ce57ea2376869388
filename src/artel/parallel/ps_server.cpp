#include "artel/parallel/ps_server.h"

#include <algorithm>
#include <sstream>
#include <bit>
#include <cstring>
#include <iostream>

#include "artel/core/error.h"
#include "artel/core/memory_stats.h"
#include "artel/core/trace.h"
#include "artel/kernels/accumulate.h"
#include "artel/kernels/elementwise.h"

namespace artel::parallel {

ParameterServer::ParameterServer(comm::ProcessGroup& world, const PsRoles& roles, PsServerOptions opts)
    : roles_(roles),
      index_(roles.server_index(world.rank())),
      opts_(std::move(opts)),
      clock_(roles.workers, opts_.staleness),
      done_(static_cast<size_t>(roles.workers), false),
      stats_(static_cast<size_t>(roles.workers)) {
  ARTEL_CHECK(roles.is_server(world.rank()), "rank ", world.rank(), " is a worker, not a server (", roles.describe(), ")");
  ARTEL_CHECK(opts_.make_optimizer != nullptr, "a parameter server needs an optimizer recipe");
  pairs_ = ps_pair_groups(world, roles, world.options().timeout);
  receive_table();
}

ParameterServer::~ParameterServer() {
  for (std::thread& t : threads_) {
    if (!t.joinable()) continue;
    if (fatal_.empty()) t.join();
    else t.detach();  // blocked on a worker the launcher is stopping; the process is about to exit
  }
}

void ParameterServer::receive_table() {
  comm::ProcessGroup& first = *pairs_[0];
  std::vector<int64_t> h = ps_recv_header(first, 0);
  ARTEL_CHECK(h[0] == static_cast<int64_t>(PsMessage::kHello), "parameter server ", index_,
              ": worker 0's first message is not its parameter table (message kind ", h[0], ")");
  Tensor words = Tensor::zeros({std::max<int64_t>(1, ps_word_count(h[2]))}, DType::i64);
  first.recv(words, 0)->wait();
  layout_ = std::make_unique<PsLayout>(parse_ps_table(ps_text(words, h[2])), roles_.servers);
  const int64_t n = layout_->elements[static_cast<size_t>(index_)];
  values_ = Tensor::zeros({n});
  grads_ = Tensor::zeros({n});
  if (n > 0) first.recv(values_, 0)->wait();
  for (int w = 0; w < roles_.workers; ++w) pending_.push_back(Tensor::zeros({n}));
  messages_.resize(static_cast<size_t>(roles_.workers));
  for (int w = 0; w < roles_.workers; ++w) tracks_.push_back("worker " + std::to_string(w));

  // The optimizer sees each parameter this server holds part of under its
  // whole shape (so the recipe groups it as the worker's does) and updates
  // only this server's elements, kept here (Optimizer::shard).
  std::map<std::string, optim::ElementRange> owned;
  std::map<std::string, Tensor> values, grads;
  for (const PsSegment& seg : layout_->segments[static_cast<size_t>(index_)]) {
    const PsParameter& p = layout_->params[seg.param];
    params_.emplace_back(p.name, autograd::Variable(Tensor::empty(p.shape), true));
    owned[p.name] = {seg.begin, seg.end};
    values[p.name] = values_.slice0(seg.offset, seg.offset + (seg.end - seg.begin));
    grads[p.name] = grads_.slice0(seg.offset, seg.offset + (seg.end - seg.begin));
  }
  optimizer_ = opts_.make_optimizer(params_);
  optimizer_->shard(owned, values, grads);
}

void ParameterServer::serve() {
  for (int w = 0; w < roles_.workers; ++w) threads_.emplace_back([this, w] { serve_worker(w); });
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] {
    if (!fatal_.empty()) return true;
    for (int w = 0; w < roles_.workers; ++w)
      if (!done_[static_cast<size_t>(w)] && !clock_.dropped(w)) return false;
    return true;
  });
  if (!fatal_.empty())
    throw Error(fatal_, clock_.staleness() == 0
                            ? "under --staleness 0 (BSP) every worker is needed, as in data parallelism; "
                              "--max-restarts restarts the job, SSP or ASP drops the worker and goes on"
                            : "--max-restarts restarts the job from its newest checkpoint");
  lock.unlock();
  for (std::thread& t : threads_) t.join();
}

void ParameterServer::serve_worker(int w) {
  comm::ProcessGroup& pair = *pairs_[static_cast<size_t>(w)];
  try {
    for (;;) {
      std::vector<int64_t> header = ps_recv_header(pair, 0);
      if (!handle(w, header)) return;
    }
  } catch (const TimeoutError&) {
    lose(w, "it sent nothing for the group's timeout (--timeout)");
  } catch (const std::exception& e) {
    const std::string what = e.what();
    lose(w, what.find(" died") != std::string::npos ? "its process died"
            : what.find("left the group") != std::string::npos ? "it left the job (see its own output)"
                                                               : what);
  }
}

bool ParameterServer::handle(int w, const std::vector<int64_t>& h) {
  switch (static_cast<PsMessage>(h[0])) {
    case PsMessage::kPull:
      answer_pull(w, h[2], PsSelection::decode(h[3]), h[4]);
      return true;
    case PsMessage::kPush: {
      const std::string& track = tracks_[static_cast<size_t>(w)];
      {
        trace::Scope span("receive push", "comm", track);
        receive_push(w, PsSelection::decode(h[4]), h[5]);
      }
      trace::Scope span("apply push", "compute", track);
      apply_push(w, h[1], std::bit_cast<double>(h[2]), h[3], pending_[static_cast<size_t>(w)]);
      return true;
    }
    case PsMessage::kStats:
      answer_stats(w);
      return true;
    case PsMessage::kMemory:
      answer_memory(w);
      return true;
    case PsMessage::kStart: {
      std::lock_guard lock(mu_);
      clock_.start_at(h[1]);
      started_ = true;
      cv_.notify_all();
      return true;
    }
    case PsMessage::kCheckpoint:
    case PsMessage::kRestore:
      checkpoint(w, static_cast<PsMessage>(h[0]) == PsMessage::kCheckpoint, h[1],
                 ps_recv_text(*pairs_[static_cast<size_t>(w)], 0, h[2]));
      return true;
    case PsMessage::kDone: {
      std::lock_guard lock(mu_);
      done_[static_cast<size_t>(w)] = true;
      cv_.notify_all();
      return false;
    }
    default:
      throw Error("parameter server " + std::to_string(index_) + ": unexpected message kind " + std::to_string(h[0]) +
                  " from worker " + std::to_string(w));
  }
}

namespace {
// The first n elements of a per-worker buffer, grown as needed.
Tensor packed(std::vector<Tensor>& buffers, int w, int64_t n) {
  Tensor& t = buffers[static_cast<size_t>(w)];
  if (!t.defined() || t.numel() < n) t = Tensor::zeros({std::max<int64_t>(n, 1)});
  return t.slice0(0, n);
}
}  // namespace

PsRowList ParameterServer::receive_rows(int w, int64_t words) {
  if (words == 0) return {};
  Tensor t = Tensor::zeros({words}, DType::i64);
  pairs_[static_cast<size_t>(w)]->recv(t, 0)->wait();
  return decode_ps_rows({t.data<int64_t>(), t.data<int64_t>() + words}, *layout_, index_);
}

void ParameterServer::receive_push(int w, PsSelection sel, int64_t row_words) {
  comm::ProcessGroup& pair = *pairs_[static_cast<size_t>(w)];
  Tensor& into = pending_[static_cast<size_t>(w)];
  const PsRowList rows = receive_rows(w, row_words);
  if (sel.dense && sel.sparse == PsSparse::whole) {  // everything: straight in
    if (into.numel() > 0) pair.recv(into, 0)->wait();
    return;
  }
  const auto no_op = [](const PsSegment&, int64_t, int64_t, int64_t) {};
  Tensor message = packed(messages_, w, ps_walk(*layout_, index_, sel, rows, no_op));
  if (message.numel() > 0) pair.recv(message, 0)->wait();
  float* dst = into.data<float>();
  const float* src = message.data<float>();
  std::fill(dst, dst + into.numel(), 0.0f);
  ps_walk(*layout_, index_, sel, rows, [&](const PsSegment& seg, int64_t at, int64_t count, int64_t pos) {
    std::memcpy(dst + seg.offset + at, src + pos, static_cast<size_t>(count) * sizeof(float));
  });
}

void ParameterServer::apply_push(int w, int64_t clock, double lr, int64_t staleness, const Tensor& grads) {
  std::lock_guard lock(mu_);
  ARTEL_CHECK(clock == clock_.clock(w), "parameter server ", index_, ": worker ", w, " pushed clock ", clock,
              " but is at clock ", clock_.clock(w));
  const int64_t slowest = clock_.min_clock();
  PsWorkerStats& s = stats_[static_cast<size_t>(w)];
  ++s.pushes;
  s.staleness.record(staleness);
  const int64_t n = values_.numel();
  if (clock_.staleness() == 0) {  // BSP: one averaged step once every worker's push of this clock is in
    const int64_t before = clock_.min_clock();
    clock_.advance(w);
    if (clock_.min_clock() > before && n > 0) {
      float* g = grads_.data<float>();
      std::fill(g, g + n, 0.0f);
      for (size_t v = 0; v < pending_.size(); ++v)
        if (!clock_.dropped(static_cast<int>(v))) kernels::add_into(g, pending_[v].data<float>(), n);
      kernels::affine(n, g, 1.0f / static_cast<float>(clock_.live_workers()), 0.0f, g);
      optimizer_->set_lr(static_cast<float>(lr));
      optimizer_->step();
    }
  } else {  // SSP, ASP: each push is a step of its own
    if (n > 0) {
      std::memcpy(grads_.data<float>(), grads.data<float>(), static_cast<size_t>(n) * sizeof(float));
      optimizer_->set_lr(static_cast<float>(lr / clock_.live_workers()));
      optimizer_->step();
    }
    clock_.advance(w);
  }
  if (opts_.after_clock && clock_.min_clock() > slowest) opts_.after_clock(clock_.min_clock());
  cv_.notify_all();
}

void ParameterServer::answer_pull(int w, int64_t required, PsSelection sel, int64_t row_words) {
  const PsRowList rows = receive_rows(w, row_words);
  const auto no_op = [](const PsSegment&, int64_t, int64_t, int64_t) {};
  Tensor out = packed(messages_, w, ps_walk(*layout_, index_, sel, rows, no_op));
  int64_t view = 0;
  const std::string& track = tracks_[static_cast<size_t>(w)];
  {
    trace::Scope span("read", "comm", track);
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return (started_ && clock_.min_clock() >= required) || !fatal_.empty(); });
    if (!fatal_.empty()) throw Error("parameter server " + std::to_string(index_) + " is stopping: " + fatal_);
    view = clock_.min_clock();
    const float* src = values_.data<float>();
    float* dst = out.data<float>();
    ps_walk(*layout_, index_, sel, rows, [&](const PsSegment& seg, int64_t at, int64_t count, int64_t pos) {
      std::memcpy(dst + pos, src + seg.offset + at, static_cast<size_t>(count) * sizeof(float));
    });
  }
  trace::Scope span("send values", "comm", track);
  comm::ProcessGroup& pair = *pairs_[static_cast<size_t>(w)];
  ps_send_header(pair, 0, PsMessage::kValues, view, out.numel());
  if (out.numel() > 0) pair.send(out, 0)->wait();
}

void ParameterServer::checkpoint(int w, bool save, int64_t step, const std::string& dir) {
  std::string problem;
  {
    std::unique_lock lock(mu_);  // no push lands while the shard is written or read
    if (save) cv_.wait(lock, [&] { return clock_.min_clock() >= step || !fatal_.empty(); });
    const PsShard shard{*layout_, index_, values_, *optimizer_};
    try {
      if (!fatal_.empty()) throw Error(fatal_);
      if (save) {
        if (!opts_.save) throw Error("this parameter server writes no checkpoints");
        opts_.save(shard, step, dir);
      } else {
        if (!opts_.restore) throw Error("this parameter server reads no checkpoints");
        opts_.restore(shard, dir);
      }
    } catch (const std::exception& e) {
      problem = e.what();
    }
  }
  comm::ProcessGroup& pair = *pairs_[static_cast<size_t>(w)];
  ps_send_header(pair, 0, PsMessage::kOutcome, problem.empty() ? 1 : 0, static_cast<int64_t>(problem.size()));
  ps_send_text(pair, 0, problem);
}

PsServerMemory ParameterServer::memory() {
  std::lock_guard lock(mu_);
  PsServerMemory m;
  m.parameters = static_cast<int64_t>(values_.nbytes());
  m.gradients = static_cast<int64_t>(grads_.nbytes());
  m.optimizer_state = optimizer_ ? optimizer_->state_bytes() : 0;
  for (const std::vector<Tensor>* buffers : {&pending_, &messages_})
    for (const Tensor& t : *buffers) m.buffers += t.defined() ? static_cast<int64_t>(t.nbytes()) : 0;
  m.peak_resident = peak_resident_bytes();
  return m;
}

void ParameterServer::answer_memory(int w) {
  ps_send_words(*pairs_[static_cast<size_t>(w)], 0, PsMessage::kMemoryReply, memory().encode());
}

void ParameterServer::answer_stats(int w) {
  std::vector<int64_t> words;
  {
    std::lock_guard lock(mu_);
    words = encode_ps_stats(stats_);
  }
  ps_send_words(*pairs_[static_cast<size_t>(w)], 0, PsMessage::kStatsReply, words);
}

void ParameterServer::lose(int w, const std::string& why) {
  std::lock_guard lock(mu_);
  if (done_[static_cast<size_t>(w)] || !fatal_.empty()) return;
  const int64_t at = clock_.clock(w);
  // Worker 0 writes the run's outputs (weights, metrics, checkpoints): the
  // others went on without it and the job ended "successfully" with none.
  if (clock_.staleness() == 0 || w == 0) {
    fatal_ = "parameter server " + std::to_string(index_) + ": lost worker " + std::to_string(w) + " at clock " +
             std::to_string(at) + ": " + why + (w == 0 && clock_.staleness() != 0
                                                    ? " (worker 0 writes the run's outputs, so the job cannot go on "
                                                      "without it)"
                                                    : "");
  } else {
    clock_.drop(w);
    stats_[static_cast<size_t>(w)].dropped = true;
    stats_[static_cast<size_t>(w)].dropped_at = at;
    if (index_ == 0) {
      std::ostringstream line;  // composed first: one write, never torn by another rank's line on the terminal
      line << "artel: parameter server: dropped worker " << w << " (rank " << w << ") at clock " << at << ": " << why
           << "; " << clock_.live_workers() << " workers go on\n";
      std::ostream& log = opts_.log ? *opts_.log : std::cerr;
      log << line.str() << std::flush;
    }
  }
  cv_.notify_all();
}

}  // namespace artel::parallel
