#include "artel/parallel/pipeline_schedule.h"

#include <algorithm>
#include <compare>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "artel/core/error.h"
#include "artel/core/overloaded.h"

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

Schedule forward_only(int micro_batches, int stages, int stage) {
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
  throw Error("unknown pipeline schedule '" + std::string(name) + "'", "use --schedule gpipe or --schedule 1f1b");
}

std::string_view schedule_kind_name(ScheduleKind kind) {
  return kind == ScheduleKind::gpipe ? "gpipe" : "1f1b";
}

Schedule make_schedule(ScheduleKind kind, int micro_batches, int stages, int stage) {
  return kind == ScheduleKind::gpipe ? gpipe(micro_batches, stages, stage)
                                     : one_f_one_b(micro_batches, stages, stage);
}

std::vector<Schedule> all_stages(ScheduleKind kind, int micro_batches, int stages) {
  check_arguments(micro_batches, stages, 0);
  std::vector<Schedule> out;
  for (int s = 0; s < stages; ++s) out.push_back(make_schedule(kind, micro_batches, stages, s));
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
  Simulator(const std::vector<Schedule>& schedules, const CostModel& cost)
      : schedules_(schedules), cost_(cost), stages_(schedules.size()) {
    result_.timelines.resize(schedules.size());
    result_.busy_time.assign(schedules.size(), 0.0);
    result_.peak_live_activations.assign(schedules.size(), 0);
  }

  SimulationResult run() {
    bool progress = true;
    while (progress) {
      progress = false;
      for (int s = 0; s < num_stages(); ++s) {
        while (try_step(s)) progress = true;
      }
    }
    for (int s = 0; s < num_stages(); ++s) {
      if (stages_[s].pc < schedules_[s].size()) report_stall(s);
    }
    check_all_received();
    finish();
    return std::move(result_);
  }

 private:
  struct StageState {
    size_t pc = 0;
    double clock = 0.0;
    std::set<int> live;  // micro-batches forwarded but not yet backwarded
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
    result_.timelines[s].push_back({ins, start, st.clock});
    ++st.pc;
    return true;
  }

  void check_peer(int s, int peer, const Instruction& ins) const {
    ARTEL_CHECK(peer >= 0 && peer < num_stages() && peer != s, where(s, stages_[s].pc, ins),
                " names a stage outside the pipeline of ", num_stages(), " stages");
  }

  void post(int s, const Message& m, const Instruction& ins) {
    StageState& st = stages_[s];
    ARTEL_CHECK(!posted_.count(m), where(s, st.pc, ins), " sends the same message twice");
    st.clock += cost_.send;
    result_.busy_time[s] += cost_.send;
    posted_[m] = st.clock + cost_.transfer;
  }

  bool receive(int s, const Message& m, const Instruction& ins) {
    auto it = posted_.find(m);
    if (it == posted_.end()) return false;
    ARTEL_CHECK(!received_.count(m), where(s, stages_[s].pc, ins), " receives the same message twice");
    received_.insert(m);
    stages_[s].clock = std::max(stages_[s].clock, it->second);
    return true;
  }

  void compute(int s, const Instruction& ins) {
    StageState& st = stages_[s];
    double took = 0.0;
    std::visit(Overloaded{
                   [&](const Forward& f) {
                     ARTEL_CHECK(st.live.insert(f.micro_batch).second, where(s, st.pc, ins),
                                 " runs a forward whose activations are still alive");
                     result_.peak_live_activations[s] =
                         std::max(result_.peak_live_activations[s], static_cast<int>(st.live.size()));
                     took = cost_.forward_of(s);
                   },
                   [&](const Backward& b) {
                     ARTEL_CHECK(st.live.erase(b.micro_batch) == 1, where(s, st.pc, ins),
                                 " has no forward before it");
                     took = cost_.backward_of(s);
                   },
                   [&](const OptimizerStep&) {
                     ARTEL_CHECK(st.live.empty(), where(s, st.pc, ins), " steps while ", st.live.size(),
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
    for (const auto& [m, time] : posted_) {
      (void)time;
      if (!received_.count(m)) {
        throw Error(detail::concat("stage ", m.src, " sends ", m.kind == 0 ? "the activation" : "the gradient",
                                   " of micro-batch ", m.micro_batch, " to stage ", m.dst, ", which never receives it"),
                    "every send needs the matching receive on the neighbour");
      }
    }
  }

  void finish() {
    for (int s = 0; s < num_stages(); ++s) {
      ARTEL_CHECK(stages_[s].live.empty(), "stage ", s, " ends with ", stages_[s].live.size(),
                  " micro-batches never run backward");
      result_.total_time = std::max(result_.total_time, stages_[s].clock);
    }
    for (int s = 0; s < num_stages(); ++s) {
      result_.bubble_share.push_back(result_.total_time > 0 ? 1.0 - result_.busy_time[s] / result_.total_time : 0.0);
    }
  }

  const std::vector<Schedule>& schedules_;
  CostModel cost_;
  std::vector<StageState> stages_;
  std::map<Message, double> posted_;  // message -> time the data is available
  std::set<Message> received_;
  SimulationResult result_;
};

}  // namespace

SimulationResult simulate(const std::vector<Schedule>& schedules, const CostModel& cost) {
  ARTEL_CHECK(!schedules.empty(), "simulate: no stages given");
  ARTEL_CHECK(cost.forward >= 0 && cost.backward >= 0 && cost.send >= 0 && cost.transfer >= 0 &&
                  cost.optimizer_step >= 0,
              "simulate: costs must be non-negative");
  for (const std::vector<double>* per : {&cost.stage_forward, &cost.stage_backward}) {
    ARTEL_CHECK(per->empty() || per->size() == schedules.size(), "simulate: ", per->size(), " stage costs for ",
                schedules.size(), " stages");
    for (double c : *per) ARTEL_CHECK(c >= 0, "simulate: costs must be non-negative");
  }
  return Simulator(schedules, cost).run();
}

}  // namespace artel::parallel
