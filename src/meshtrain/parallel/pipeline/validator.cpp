#include "meshtrain/parallel/pipeline/validator.hpp"

#include <algorithm>
#include <span>
#include <string>

#include "meshtrain/core/error.hpp"

namespace meshtrain::parallel::pipeline {
namespace {

// What happened to one (virtual stage, micro-batch) so far. Times are
// negative until the send has run.
struct Cell {
  bool forward = false, input_grad = false, weight_grad = false;
  bool activation_received = false, gradient_received = false;
  double activation_sent = -1.0;  // output sent to stage s+1: arrives at this time
  double gradient_sent = -1.0;    // input gradient sent to stage s-1: arrives at this time
};

struct RankState {
  size_t next = 0;  // index of the next action to run
  double clock = 0.0, busy = 0.0;
  int in_flight = 0, weight_pending = 0;
  int peak_in_flight = 0, peak_weight_pending = 0;
};

class Simulation {
 public:
  Simulation(const Schedule& s, std::span<const ActionCosts> c)
      : schedule_(s),
        costs_(c),
        cells_(size_t(s.stages()) * size_t(s.micro_batches)),
        ranks_(size_t(s.ranks)),
        link_free_(size_t(s.ranks) * size_t(s.ranks), 0.0) {}

  ScheduleReport run() {
    check_shape();
    for (bool moved = true; moved;) {
      moved = false;
      for (int r = 0; r < schedule_.ranks; ++r)
        while (ranks_[r].next < schedule_.actions[r].size() && step(r, schedule_.actions[r][ranks_[r].next])) {
          ++ranks_[r].next;
          moved = true;
        }
    }
    report_deadlock();
    check_complete();
    check_message_order();
    return report();
  }

 private:
  [[noreturn]] void fail(int rank, const Action& a, const std::string& why) const {
    throw Error("pipeline schedule: rank " + std::to_string(rank) + ", " + describe(a) + " (stage " +
                std::to_string(schedule_.stage_of(rank, a.chunk)) + "): " + why);
  }
  Cell& cell(int stage, int micro_batch) { return cells_[size_t(stage) * schedule_.micro_batches + micro_batch]; }

  void check_shape() const {
    if (int(schedule_.actions.size()) != schedule_.ranks)
      throw Error("pipeline schedule: lists actions for " + std::to_string(schedule_.actions.size()) +
                  " ranks, expected " + std::to_string(schedule_.ranks));
    for (int r = 0; r < schedule_.ranks; ++r)
      for (const Action& a : schedule_.actions[r]) {
        if (a.micro_batch < 0 || a.micro_batch >= schedule_.micro_batches) fail(r, a, "micro-batch out of range");
        if (a.chunk < 0 || a.chunk >= schedule_.chunks) fail(r, a, "chunk out of range");
      }
  }

  // Transports match the messages between two ranks in the order they were
  // sent (transport.hpp), so the receiver must post its receives from a
  // rank in the order that rank sends: otherwise micro-batches of equal
  // size would swap silently. A message is (activation?, micro-batch, the
  // sender's stage).
  void check_message_order() const {
    struct Message {
      bool activation;
      int micro_batch, from_stage;
      bool operator==(const Message&) const = default;
    };
    const int P = schedule_.ranks;
    std::vector<std::vector<Message>> sent(size_t(P * P)), received(size_t(P * P));  // [from * P + to]
    for (int r = 0; r < P; ++r)
      for (const Action& a : schedule_.actions[r]) {
        if (is_compute(a.kind)) continue;
        const int s = schedule_.stage_of(r, a.chunk), peer = peer_rank(schedule_, r, a);
        const bool activation = a.kind == ActionKind::SendActivation || a.kind == ActionKind::RecvActivation;
        if (is_send(a.kind))
          sent[size_t(r * P + peer)].push_back({activation, a.micro_batch, s});
        else
          received[size_t(peer * P + r)].push_back({activation, a.micro_batch, peer_stage(schedule_, r, a)});
      }
    for (int from = 0; from < P; ++from)
      for (int to = 0; to < P; ++to) {
        const auto& out = sent[size_t(from * P + to)];
        const auto& in = received[size_t(from * P + to)];
        for (size_t i = 0; i < std::min(out.size(), in.size()); ++i)
          if (!(out[i] == in[i]))
            throw Error("pipeline schedule: rank " + std::to_string(to) + " receives message " + std::to_string(i) +
                        " from rank " + std::to_string(from) + " out of order: it expects the " +
                        (in[i].activation ? "activation" : "gradient") + " of micro-batch " +
                        std::to_string(in[i].micro_batch) + " from stage " + std::to_string(in[i].from_stage) +
                        ", but rank " + std::to_string(from) + " sends the " +
                        (out[i].activation ? "activation" : "gradient") + " of micro-batch " +
                        std::to_string(out[i].micro_batch) + " from stage " + std::to_string(out[i].from_stage) +
                        " then (transports match messages in order)");
      }
  }

  // When a message rank r sends now arrives: after its transfer, behind the
  // messages it sent the same peer before.
  double arrival(int r, const Action& a, const ActionCosts& costs) {
    double& free = link_free_[size_t(r) * size_t(schedule_.ranks) + size_t(peer_rank(schedule_, r, a))];
    free = std::max(free, ranks_[size_t(r)].clock) + costs.transfer;
    return free;
  }

  // Runs `a` on rank r; false when it is a receive whose send has not run.
  bool step(int r, const Action& a) {
    RankState& rank = ranks_[r];
    const int s = schedule_.stage_of(r, a.chunk), last = schedule_.stages() - 1;
    Cell& here = cell(s, a.micro_batch);
    const ActionCosts& costs = costs_[costs_.size() == 1 ? 0 : size_t(r)];
    auto compute = [&](double cost) { rank.clock += cost, rank.busy += cost; };
    switch (a.kind) {
      case ActionKind::RecvActivation: {
        if (s == 0) fail(r, a, "the first stage has no stage before it to receive from");
        if (here.activation_received) fail(r, a, "received twice");
        const double sent = cell(s - 1, a.micro_batch).activation_sent;
        if (sent < 0) return false;
        rank.clock = std::max(rank.clock, sent);
        here.activation_received = true;
        return true;
      }
      case ActionKind::RecvGradient: {
        if (s == last) fail(r, a, "the last stage has no stage after it to receive from");
        if (here.gradient_received) fail(r, a, "received twice");
        const double sent = cell(s + 1, a.micro_batch).gradient_sent;
        if (sent < 0) return false;
        rank.clock = std::max(rank.clock, sent);
        here.gradient_received = true;
        return true;
      }
      case ActionKind::SendActivation:
        if (s == last) fail(r, a, "the last stage has no stage after it to send to");
        if (!here.forward) fail(r, a, "sent before its forward ran");
        if (here.activation_sent >= 0) fail(r, a, "sent twice");
        here.activation_sent = arrival(r, a, costs);
        return true;
      case ActionKind::SendGradient:
        if (s == 0) fail(r, a, "the first stage has no stage before it to send to");
        if (!here.input_grad) fail(r, a, "sent before its backward ran");
        if (here.gradient_sent >= 0) fail(r, a, "sent twice");
        here.gradient_sent = arrival(r, a, costs);
        return true;
      case ActionKind::Forward:
        if (here.forward) fail(r, a, "runs twice");
        if (s > 0 && !here.activation_received) fail(r, a, "runs before its input activation was received");
        here.forward = true;
        compute(costs.forward);
        rank.in_flight++;
        rank.peak_in_flight = std::max(rank.peak_in_flight, rank.in_flight);
        return true;
      case ActionKind::Backward:
      case ActionKind::BackwardInput: {
        const bool whole = a.kind == ActionKind::Backward;
        if (here.input_grad || (whole && here.weight_grad)) fail(r, a, "runs twice (a backward of this micro-batch already ran)");
        if (!here.forward) fail(r, a, "runs before its forward");
        if (s < last && !here.gradient_received) fail(r, a, "runs before its output gradient was received");
        here.input_grad = true;
        here.weight_grad = here.weight_grad || whole;
        compute(costs.backward_input + (whole ? costs.backward_weight : 0.0));
        rank.in_flight--;
        if (!whole) rank.weight_pending++;
        rank.peak_weight_pending = std::max(rank.peak_weight_pending, rank.weight_pending);
        return true;
      }
      case ActionKind::BackwardWeight:
        if (here.weight_grad) fail(r, a, "runs twice (the weight gradient of this micro-batch already ran)");
        if (!here.input_grad) fail(r, a, "runs before its backward_input");
        here.weight_grad = true;
        compute(costs.backward_weight);
        rank.weight_pending--;
        return true;
    }
    fail(r, a, "unknown action kind");
  }

  void report_deadlock() const {
    std::string stuck;
    for (int r = 0; r < schedule_.ranks; ++r) {
      const RankState& rank = ranks_[r];
      if (rank.next == schedule_.actions[r].size()) continue;
      const Action& a = schedule_.actions[r][rank.next];
      stuck += "\n  rank " + std::to_string(r) + " at action " + std::to_string(rank.next) + ", " + describe(a) +
               ", waits for rank " + std::to_string(peer_rank(schedule_, r, a));
    }
    if (!stuck.empty()) throw Error("pipeline schedule deadlocks:" + stuck);
  }

  // Every stage's work done once, every send received: reported at the rank
  // that owns the stage.
  void check_complete() {
    const int last = schedule_.stages() - 1;
    for (int s = 0; s <= last; ++s)
      for (int m = 0; m < schedule_.micro_batches; ++m) {
        const Cell& c = cell(s, m);
        const int r = s % schedule_.ranks, chunk = s / schedule_.ranks;
        auto missing = [&](ActionKind kind, const std::string& why) { fail(r, {kind, m, chunk}, why); };
        if (!c.forward) missing(ActionKind::Forward, "never runs");
        if (!c.input_grad) missing(ActionKind::Backward, "never runs (no backward or backward_input)");
        if (!c.weight_grad) missing(ActionKind::BackwardWeight, "never runs");
        if (s < last && c.activation_sent < 0) missing(ActionKind::SendActivation, "never runs");
        if (s > 0 && c.gradient_sent < 0) missing(ActionKind::SendGradient, "never runs");
        if (s > 0 && !c.activation_received) missing(ActionKind::RecvActivation, "never runs");
        if (s < last && !c.gradient_received) missing(ActionKind::RecvGradient, "never runs");
      }
  }

  ScheduleReport report() const {
    ScheduleReport out;
    for (const RankState& rank : ranks_) out.makespan = std::max(out.makespan, rank.clock);
    double idle = 0.0;
    for (const RankState& rank : ranks_) {
      out.idle.push_back(out.makespan - rank.busy);
      idle += out.idle.back();
      out.peak_in_flight.push_back(rank.peak_in_flight);
      out.peak_weight_pending.push_back(rank.peak_weight_pending);
    }
    out.bubble = out.makespan > 0 ? idle / (schedule_.ranks * out.makespan) : 0.0;
    return out;
  }

  const Schedule& schedule_;
  std::span<const ActionCosts> costs_;  // one for every rank, or one per rank
  std::vector<Cell> cells_;  // [stage][micro-batch]
  std::vector<RankState> ranks_;
  std::vector<double> link_free_;  // [from * ranks + to]: when that link's last message arrives
};

}  // namespace

ScheduleReport validate_schedule(const Schedule& schedule, const ActionCosts& costs) {
  return validate_schedule(schedule, std::span<const ActionCosts>(&costs, 1));
}

ScheduleReport validate_schedule(const Schedule& schedule, std::span<const ActionCosts> rank_costs) {
  if (schedule.ranks < 1 || schedule.micro_batches < 1 || schedule.chunks < 1)
    throw Error("pipeline schedule: needs at least 1 rank, micro-batch and chunk");
  if (rank_costs.size() != 1 && rank_costs.size() != size_t(schedule.ranks))
    throw Error("pipeline schedule: " + std::to_string(rank_costs.size()) + " cost rows for " +
                std::to_string(schedule.ranks) + " ranks (give one, or one per rank)");
  return Simulation(schedule, rank_costs).run();
}

}  // namespace meshtrain::parallel::pipeline
