#include "artel/parallel/pipeline_schedule.h"

#include <algorithm>
#include <compare>
#include <optional>
#include <sstream>
#include <unordered_map>
#include <utility>

#include "artel/core/error.h"
#include "artel/core/overloaded.h"
#include "artel/parallel/interleaved_schedule.h"

namespace artel::parallel {

namespace {

void check_arguments(int micro_batches, int stages, int stage) {
  if (micro_batches < 1 || stages < 1 || stage < 0 || stage >= stages) {
    throw Error(detail::concat("pipeline schedule: need micro_batches >= 1, stages >= 1 and 0 <= stage < stages,",
                               " got M=", micro_batches, " P=", stages, " stage=", stage),
                "pass --micro-batches >= 1 and --pp >= 1");
  }
}

// Receive the activation from upstream (unless first), compute, pass it on (unless last).
void append_forward(Schedule& out, int mb, int stages, int stage) {
  if (stage > 0) out.emplace_back(RecvActivation{mb, stage - 1});
  out.emplace_back(Forward{mb});
  if (stage < stages - 1) out.emplace_back(SendActivation{mb, stage + 1});
}

// Receive the output gradient from downstream (unless last), compute, pass the
// input gradient upstream (unless first).
void append_backward(Schedule& out, int mb, int stages, int stage) {
  if (stage < stages - 1) out.emplace_back(RecvGrad{mb, stage + 1});
  out.emplace_back(Backward{mb});
  if (stage > 0) out.emplace_back(SendGrad{mb, stage - 1});
}

}  // namespace

std::string to_string(const Instruction& ins) {
  return std::visit(
      Overloaded{
          [](const Forward& i) { return detail::concat("Forward(mb=", i.micro_batch, ")"); },
          [](const Backward& i) { return detail::concat("Backward(mb=", i.micro_batch, ")"); },
          [](const SendActivation& i) {
            return detail::concat("SendActivation(mb=", i.micro_batch, ", to=", i.to, ")");
          },
          [](const RecvActivation& i) {
            return detail::concat("RecvActivation(mb=", i.micro_batch, ", from=", i.from, ")");
          },
          [](const SendGrad& i) { return detail::concat("SendGrad(mb=", i.micro_batch, ", to=", i.to, ")"); },
          [](const RecvGrad& i) { return detail::concat("RecvGrad(mb=", i.micro_batch, ", from=", i.from, ")"); },
          [](const OptimizerStep&) { return std::string("OptimizerStep"); },
      },
      ins);
}

std::string to_string(const Schedule& schedule) {
  std::string out;
  for (const Instruction& ins : schedule) out += to_string(ins) + "\n";
  return out;
}

Schedule forward_only(int micro_batches, int stages, int stage, int chunks) {
  if (chunks > 1) return interleaved_forward_only(micro_batches, stages, chunks, stage);
  check_arguments(micro_batches, stages, stage);
  Schedule out;
  for (int mb = 0; mb < micro_batches; ++mb) append_forward(out, mb, stages, stage);
  return out;
}

Schedule gpipe(int micro_batches, int stages, int stage) {
  check_arguments(micro_batches, stages, stage);
  Schedule out;
  for (int mb = 0; mb < micro_batches; ++mb) append_forward(out, mb, stages, stage);
  for (int mb = 0; mb < micro_batches; ++mb) append_backward(out, mb, stages, stage);
  out.emplace_back(OptimizerStep{});
  return out;
}

Schedule one_f_one_b(int micro_batches, int stages, int stage) {
  check_arguments(micro_batches, stages, stage);
  // Stage s must run P - s - 1 forwards before the gradient of the first
  // micro-batch can come back from the last stage; fewer if M is small.
  const int warmup = std::min(stages - stage - 1, micro_batches);
  const int steady = micro_batches - warmup;
  Schedule out;
  for (int mb = 0; mb < warmup; ++mb) append_forward(out, mb, stages, stage);
  for (int i = 0; i < steady; ++i) {
    append_forward(out, warmup + i, stages, stage);
    append_backward(out, i, stages, stage);
  }
  for (int mb = steady; mb < micro_batches; ++mb) append_backward(out, mb, stages, stage);
  out.emplace_back(OptimizerStep{});
  return out;
}

ScheduleKind parse_schedule_kind(std::string_view name) {
  if (name == "gpipe") return ScheduleKind::gpipe;
  if (name == "1f1b") return ScheduleKind::one_f_one_b;
  if (name == "interleaved") return ScheduleKind::interleaved;
  throw Error("unknown pipeline schedule '" + std::string(name) + "'",
              "use --schedule gpipe, --schedule 1f1b or --schedule interleaved");
}

std::string_view schedule_kind_name(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::gpipe: return "gpipe";
    case ScheduleKind::one_f_one_b: return "1f1b";
    case ScheduleKind::interleaved: return "interleaved";
  }
  return "?";
}

Schedule make_schedule(ScheduleKind kind, int micro_batches, int stages, int stage, int chunks) {
  ARTEL_CHECK(kind == ScheduleKind::interleaved || chunks == 1, "pipeline schedule ", schedule_kind_name(kind),
              ": ", chunks, " model chunks a stage; only the interleaved schedule takes more than one");
  switch (kind) {
    case ScheduleKind::gpipe: return gpipe(micro_batches, stages, stage);
    case ScheduleKind::one_f_one_b: return one_f_one_b(micro_batches, stages, stage);
    case ScheduleKind::interleaved: return interleaved_one_f_one_b(micro_batches, stages, chunks, stage);
  }
  return {};
}

std::vector<Schedule> all_stages(ScheduleKind kind, int micro_batches, int stages, int chunks) {
  check_arguments(micro_batches, stages, 0);
  std::vector<Schedule> out;
  for (int s = 0; s < stages; ++s) out.push_back(make_schedule(kind, micro_batches, stages, s, chunks));
  return out;
}

// ---------------------------------------------------------------------------
// Simulation

namespace {

// A message between stages, as a tagged point-to-point op would match it.
struct Message {
  int kind = 0;  // 0 activation, 1 gradient
  int src = 0;
  int dst = 0;
  int micro_batch = 0;
  auto operator<=>(const Message&) const = default;
};

// Posted messages: one array per channel (kind, sender, receiver), indexed by
// micro-batch. The planner plays up to a million instructions per layout
// (64 stages x 256 micro-batches x 16 chunks); dense arrays read in nearly
// the order they were written keep that in cache, where a tree or a hash of
// every message did not (`artel plan --search` of 1,024 layers on 64
// workers: 62 s with a std::map).
class Mailbox {
 public:
  struct Slot {
    double available = 0.0;  // when the data is there
    uint8_t state = 0;       // 0 not posted, 1 posted, 2 received
  };
  // The slot of m, created empty if need be.
  Slot& at(const Message& m) {
    const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(m.src)) << 33) |
                         (static_cast<uint64_t>(static_cast<uint32_t>(m.dst)) << 1) | static_cast<uint64_t>(m.kind);
    auto [it, added] = channel_of_.try_emplace(key, channels_.size());
    if (added) channels_.push_back({m, {}});
    std::vector<Slot>& slots = channels_[it->second].slots;
    const auto mb = static_cast<size_t>(m.micro_batch);
    if (mb >= slots.size()) slots.resize(std::max(mb + 1, 2 * slots.size()));
    return slots[mb];
  }
  // The least message posted and never received, if any.
  std::optional<Message> first_unreceived() const {
    std::optional<Message> first;
    for (const Channel& c : channels_)
      for (size_t mb = 0; mb < c.slots.size(); ++mb) {
        Message m = c.route;
        m.micro_batch = static_cast<int>(mb);
        if (c.slots[mb].state == 1 && (!first || m < *first)) first = m;
      }
    return first;
  }

 private:
  struct Channel {
    Message route;  // its kind, src and dst (micro_batch unused)
    std::vector<Slot> slots;
  };
  std::unordered_map<uint64_t, size_t> channel_of_;
  std::vector<Channel> channels_;
};

struct Comm {
  bool is_send = false;
  Message message;
};

std::optional<Comm> comm_of(const Instruction& ins, int stage) {
  if (auto* i = std::get_if<SendActivation>(&ins)) return Comm{true, {0, stage, i->to, i->micro_batch}};
  if (auto* i = std::get_if<RecvActivation>(&ins)) return Comm{false, {0, i->from, stage, i->micro_batch}};
  if (auto* i = std::get_if<SendGrad>(&ins)) return Comm{true, {1, stage, i->to, i->micro_batch}};
  if (auto* i = std::get_if<RecvGrad>(&ins)) return Comm{false, {1, i->from, stage, i->micro_batch}};
  return std::nullopt;
}

std::string where(int stage, size_t index, const Instruction& ins) {
  return detail::concat("stage ", stage, " at #", index, " ", to_string(ins));
}

class Simulator {
 public:
  Simulator(const std::vector<Schedule>& schedules, const CostModel& cost, Timelines timelines)
      : schedules_(schedules), cost_(cost), keep_timelines_(timelines == Timelines::kept), stages_(schedules.size()) {
    result_.timelines.resize(schedules.size());
    result_.busy_time.assign(schedules.size(), 0.0);
    result_.peak_live_activations.assign(schedules.size(), 0);
    for (size_t s = 0; s < schedules.size() && keep_timelines_; ++s) result_.timelines[s].reserve(schedules[s].size());
  }

  // Each stage runs until it waits on a receive, and runs again only when a
  // message is posted to it: every instruction is tried O(1) times, however
  // long the pipeline. A stage's clock depends only on its own instructions
  // and its messages' times, so the order stages run in changes nothing.
  SimulationResult run() {
    std::vector<int> ready(static_cast<size_t>(num_stages()));
    for (int s = 0; s < num_stages(); ++s) ready[static_cast<size_t>(s)] = num_stages() - 1 - s;
    while (!ready.empty()) {
      const int s = ready.back();
      ready.pop_back();
      while (try_step(s)) {
        for (int woken : woken_) ready.push_back(woken);
        woken_.clear();
      }
      if (stages_[s].pc < schedules_[s].size()) stages_[s].waiting = true;
    }
    for (int s = 0; s < num_stages(); ++s) {
      if (stages_[s].pc < schedules_[s].size()) report_stall(s);
    }
    check_all_received();
    finish();
    return std::move(result_);
  }

 private:
  // Micro-batches forwarded but not yet backwarded, a flag each (as Mailbox,
  // dense; simulate() has refused negative micro-batches).
  struct LiveSet {
    std::vector<char> in;
    int count = 0;
    bool insert(int mb) {
      if (mb >= static_cast<int>(in.size())) in.resize(static_cast<size_t>(mb) + 1, 0);
      if (in[static_cast<size_t>(mb)]) return false;
      in[static_cast<size_t>(mb)] = 1, ++count;
      return true;
    }
    bool erase(int mb) {
      if (mb >= static_cast<int>(in.size()) || !in[static_cast<size_t>(mb)]) return false;
      in[static_cast<size_t>(mb)] = 0, --count;
      return true;
    }
  };
  struct StageState {
    size_t pc = 0;
    double clock = 0.0;
    LiveSet live;
    bool waiting = false;  // blocked on a receive until a message is posted to it
  };

  int num_stages() const { return static_cast<int>(schedules_.size()); }

  // Runs the next instruction of stage s; false when done or blocked on a receive.
  bool try_step(int s) {
    StageState& st = stages_[s];
    if (st.pc >= schedules_[s].size()) return false;
    const Instruction& ins = schedules_[s][st.pc];
    const double start = st.clock;
    if (auto comm = comm_of(ins, s)) {
      check_peer(s, comm->is_send ? comm->message.dst : comm->message.src, ins);
      if (comm->is_send) {
        post(s, comm->message, ins);
      } else if (!receive(s, comm->message, ins)) {
        return false;
      }
    } else {
      compute(s, ins);
    }
    if (keep_timelines_) result_.timelines[s].push_back({ins, start, st.clock});
    ++st.pc;
    return true;
  }

  void check_peer(int s, int peer, const Instruction& ins) const {
    ARTEL_CHECK(peer >= 0 && peer < num_stages() && peer != s, where(s, stages_[s].pc, ins),
                " names a stage outside the pipeline of ", num_stages(), " stages");
  }

  void post(int s, const Message& m, const Instruction& ins) {
    StageState& st = stages_[s];
    st.clock += cost_.send;
    Mailbox::Slot& slot = messages_.at(m);
    ARTEL_CHECK(slot.state == 0, where(s, st.pc, ins), " sends the same message twice");
    slot = {st.clock + cost_.transfer, 1};
    result_.busy_time[s] += cost_.send;
    if (std::exchange(stages_[m.dst].waiting, false)) woken_.push_back(m.dst);
  }

  bool receive(int s, const Message& m, const Instruction& ins) {
    Mailbox::Slot& slot = messages_.at(m);
    if (slot.state == 0) return false;
    ARTEL_CHECK(slot.state == 1, where(s, stages_[s].pc, ins), " receives the same message twice");
    slot.state = 2;
    stages_[s].clock = std::max(stages_[s].clock, slot.available);
    return true;
  }

  void compute(int s, const Instruction& ins) {
    StageState& st = stages_[s];
    double took = 0.0;
    std::visit(Overloaded{
                   [&](const Forward& f) {
                     ARTEL_CHECK(st.live.insert(f.micro_batch), where(s, st.pc, ins),
                                 " runs a forward whose activations are still alive");
                     result_.peak_live_activations[s] = std::max(result_.peak_live_activations[s], st.live.count);
                     took = cost_.forward_of(s);
                   },
                   [&](const Backward& b) {
                     ARTEL_CHECK(st.live.erase(b.micro_batch) == 1, where(s, st.pc, ins),
                                 " has no forward before it");
                     took = cost_.backward_of(s);
                   },
                   [&](const OptimizerStep&) {
                     ARTEL_CHECK(st.live.count == 0, where(s, st.pc, ins), " steps while ", st.live.count,
                                 " micro-batches still wait for their backward");
                     took = cost_.optimizer_step;
                   },
                   [](const auto&) {},
               },
               ins);
    st.clock += took;
    result_.busy_time[s] += took;
  }

  // Whether stage `peer` still has the send that matches m ahead of it.
  bool will_send(int peer, const Message& m) const {
    const Schedule& list = schedules_[peer];
    for (size_t i = stages_[peer].pc; i < list.size(); ++i) {
      auto comm = comm_of(list[i], peer);
      if (comm && comm->is_send && comm->message == m) return true;
    }
    return false;
  }

  // Every stage still running is blocked on a receive: follow who waits for
  // whom from stage `first` until a stage that never sends, or a cycle.
  [[noreturn]] void report_stall(int first) const {
    std::vector<int> chain;
    int s = first;
    while (std::find(chain.begin(), chain.end(), s) == chain.end()) {
      const Instruction& ins = schedules_[s][stages_[s].pc];
      const Message m = comm_of(ins, s)->message;
      if (!will_send(m.src, m)) {
        throw Error(detail::concat(where(s, stages_[s].pc, ins), " waits for a send that stage ", m.src,
                                   " never makes"),
                    "every receive needs the matching send on the neighbour (same kind and micro-batch)");
      }
      chain.push_back(s);
      s = m.src;
    }
    std::ostringstream msg;
    msg << "pipeline schedule deadlocks:";
    for (auto it = std::find(chain.begin(), chain.end(), s); it != chain.end(); ++it) {
      const Instruction& ins = schedules_[*it][stages_[*it].pc];
      msg << " " << where(*it, stages_[*it].pc, ins)
          << " waits for stage " << comm_of(ins, *it)->message.src << (it + 1 == chain.end() ? "" : ";");
    }
    throw Error(msg.str(), "a stage receives before it makes the send its neighbour needs first; reorder the schedule");
  }

  void check_all_received() const {
    const std::optional<Message> first = messages_.first_unreceived();
    if (!first) return;
    const Message& m = *first;
    throw Error(detail::concat("stage ", m.src, " sends ", m.kind == 0 ? "the activation" : "the gradient",
                               " of micro-batch ", m.micro_batch, " to stage ", m.dst, ", which never receives it"),
                "every send needs the matching receive on the neighbour");
  }

  void finish() {
    for (int s = 0; s < num_stages(); ++s) {
      const Schedule& mine = schedules_[s];
      const bool evaluation = std::none_of(mine.begin(), mine.end(), [](const Instruction& ins) {
        return std::holds_alternative<Backward>(ins);
      });
      ARTEL_CHECK(evaluation || stages_[s].live.count == 0, "stage ", s, " ends with ", stages_[s].live.count,
                  " micro-batches never run backward");
      result_.total_time = std::max(result_.total_time, stages_[s].clock);
    }
    for (int s = 0; s < num_stages(); ++s) {
      result_.bubble_share.push_back(result_.total_time > 0 ? 1.0 - result_.busy_time[s] / result_.total_time : 0.0);
    }
  }

  const std::vector<Schedule>& schedules_;
  CostModel cost_;
  bool keep_timelines_;
  std::vector<StageState> stages_;
  Mailbox messages_;
  std::vector<int> woken_;  // stages a post just released from waiting
  SimulationResult result_;
};

}  // namespace

SimulationResult simulate(const std::vector<Schedule>& schedules, const CostModel& cost, Timelines timelines) {
  ARTEL_CHECK(!schedules.empty(), "simulate: no stages given");
  ARTEL_CHECK(cost.forward >= 0 && cost.backward >= 0 && cost.send >= 0 && cost.transfer >= 0 &&
                  cost.optimizer_step >= 0,
              "simulate: costs must be non-negative");
  for (const std::vector<double>* per : {&cost.stage_forward, &cost.stage_backward}) {
    ARTEL_CHECK(per->empty() || per->size() == schedules.size(), "simulate: ", per->size(), " stage costs for ",
                schedules.size(), " stages");
    for (double c : *per) ARTEL_CHECK(c >= 0, "simulate: costs must be non-negative");
  }
  for (size_t s = 0; s < schedules.size(); ++s)
    for (size_t i = 0; i < schedules[s].size(); ++i) {
      const int mb = std::visit(
          Overloaded{[](const OptimizerStep&) { return 0; }, [](const auto& x) { return x.micro_batch; }}, schedules[s][i]);
      ARTEL_CHECK(mb >= 0, where(static_cast<int>(s), i, schedules[s][i]), " names a negative micro-batch");
    }
  return Simulator(schedules, cost, timelines).run();
}

}  // namespace artel::parallel
