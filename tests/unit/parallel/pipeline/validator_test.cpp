// The validator catches broken schedules, naming the rank, the action and
// the micro-batch, and measures what it accepts.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "meshtrain/core/error.hpp"
#include "meshtrain/parallel/pipeline/schedule.hpp"
#include "meshtrain/parallel/pipeline/validator.hpp"

namespace meshtrain::parallel::pipeline {
namespace {

std::string error_of(const Schedule& schedule) {
  try {
    validate_schedule(schedule);
  } catch (const Error& e) {
    return e.what();
  }
  return "accepted";
}

// The position of `a` in `rank`'s list.
size_t position(const Schedule& s, int rank, const Action& a) {
  const auto& list = s.actions[rank];
  return size_t(std::find(list.begin(), list.end(), a) - list.begin());
}

void erase(Schedule& s, int rank, const Action& a) {
  s.actions[rank].erase(s.actions[rank].begin() + long(position(s, rank, a)));
}

TEST(PipelineValidator, TimesOneFOneB) {
  // P = 2, M = 2, F = B = W = 1 (a whole backward costs 2): rank 1 starts
  // after rank 0's first forward, rank 0's last backward waits for rank 1's;
  // makespan (M+P-1)(F+B+W) = 9, 3 idle on each rank.
  const ScheduleReport r = validate_schedule(make_schedule(ScheduleKind::OneFOneB, 2, 2));
  EXPECT_DOUBLE_EQ(r.makespan, 9.0);
  EXPECT_EQ(r.idle, (std::vector<double>{3.0, 3.0}));
  EXPECT_DOUBLE_EQ(r.bubble, 1.0 / 3.0);
  EXPECT_EQ(r.peak_in_flight, (std::vector<int>{2, 1}));
  EXPECT_EQ(r.peak_weight_pending, (std::vector<int>{0, 0}));
}

TEST(PipelineValidator, CountsDeferredWeightGradients) {
  // ZB-H1 rank r defers W's by r micro-batches: r+1 pending at the end.
  const ScheduleReport r = validate_schedule(make_schedule(ScheduleKind::ZeroBubble, 4, 8));
  EXPECT_EQ(r.peak_weight_pending, (std::vector<int>{1, 2, 3, 4}));
}

// A broken schedule: a correct one with one edit, and the message it gets.
struct Broken {
  std::string what;
  Schedule schedule;
  std::function<void(Schedule&)> edit;
  std::string message;
};

void insert_at(Schedule& s, int rank, size_t at, const Action& a) {
  s.actions[rank].insert(s.actions[rank].begin() + long(at), a);
}

TEST(PipelineValidator, CatchesBrokenSchedules) {
  using K = ActionKind;
  const std::string at = "pipeline schedule: rank ";
  const Broken cases[] = {
      {"missing backward", make_schedule(ScheduleKind::GPipe, 1, 2),
       [](Schedule& s) { erase(s, 0, {K::Backward, 1, 0}); },
       at + "0, backward(micro-batch 1, chunk 0) (stage 0): never runs (no backward or backward_input)"},
      // With a peer the send of its gradient shows the hole first.
      {"missing backward with a peer", make_schedule(ScheduleKind::OneFOneB, 2, 3),
       [](Schedule& s) { erase(s, 1, {K::Backward, 1, 0}); },
       at + "1, send_gradient(micro-batch 1, chunk 0) (stage 1): sent before its backward ran"},
      // Rank 0 waits for micro-batch 0's gradient before sending its activation.
      {"swapped send and receive", make_schedule(ScheduleKind::OneFOneB, 2, 1),
       [](Schedule& s) {
         std::swap(s.actions[0][position(s, 0, {K::SendActivation, 0, 0})],
                   s.actions[0][position(s, 0, {K::RecvGradient, 0, 0})]);
       },
       "pipeline schedule deadlocks:\n"
       "  rank 0 at action 1, recv_gradient(micro-batch 0, chunk 0), waits for rank 1\n"
       "  rank 1 at action 0, recv_activation(micro-batch 0, chunk 0), waits for rank 0"},
      {"duplicated forward", make_schedule(ScheduleKind::GPipe, 3, 4),
       [](Schedule& s) { insert_at(s, 1, position(s, 1, {K::Forward, 2, 0}), {K::Forward, 2, 0}); },
       at + "1, forward(micro-batch 2, chunk 0) (stage 1): runs twice"},
      {"forward before its input", make_schedule(ScheduleKind::OneFOneB, 2, 2),
       [](Schedule& s) { std::swap(s.actions[1][0], s.actions[1][1]); },
       at + "1, forward(micro-batch 0, chunk 0) (stage 1): runs before its input activation was received"},
      {"W before its B", make_schedule(ScheduleKind::ZeroBubble, 2, 2),
       [](Schedule& s) {
         erase(s, 1, {K::BackwardWeight, 0, 0});
         insert_at(s, 1, position(s, 1, {K::BackwardInput, 0, 0}), {K::BackwardWeight, 0, 0});
       },
       at + "1, backward_weight(micro-batch 0, chunk 0) (stage 1): runs before its backward_input"},
      // Chunk 1 of rank 0 is stage 2, fed by rank 1 (stage 1).
      {"interleaved input never received", make_schedule(ScheduleKind::Interleaved, 2, 2, 2),
       [](Schedule& s) { erase(s, 0, {K::RecvActivation, 0, 1}); },
       at + "0, forward(micro-batch 0, chunk 1) (stage 2): runs before its input activation was received"},
      {"send past the last stage", make_schedule(ScheduleKind::OneFOneB, 1, 1),
       [](Schedule& s) { insert_at(s, 0, 1, {K::SendActivation, 0, 0}); },
       at + "0, send_activation(micro-batch 0, chunk 0) (stage 0): the last stage has no stage after it to send to"},
      {"receive twice", make_schedule(ScheduleKind::OneFOneB, 2, 1),
       [](Schedule& s) { s.actions[1].push_back({K::RecvActivation, 0, 0}); },
       at + "1, recv_activation(micro-batch 0, chunk 0) (stage 1): received twice"},
      // Buffered sends would match by identity, but a transport matches in
      // order: rank 1 must not take micro-batch 1's activation first.
      {"receives out of order", make_schedule(ScheduleKind::GPipe, 2, 2),
       [](Schedule& s) {
         std::swap(s.actions[1][position(s, 1, {K::RecvActivation, 0, 0})],
                   s.actions[1][position(s, 1, {K::RecvActivation, 1, 0})]);
         std::swap(s.actions[1][position(s, 1, {K::Forward, 0, 0})], s.actions[1][position(s, 1, {K::Forward, 1, 0})]);
       },
       "pipeline schedule: rank 1 receives message 0 from rank 0 out of order: it expects the activation of "
       "micro-batch 1 from stage 0, but rank 0 sends the activation of micro-batch 0 from stage 0 then (transports "
       "match messages in order)"},
      {"micro-batch out of range", make_schedule(ScheduleKind::OneFOneB, 2, 1),
       [](Schedule& s) { s.actions[1].push_back({K::Forward, 5, 0}); },
       at + "1, forward(micro-batch 5, chunk 0) (stage 1): micro-batch out of range"},
  };
  for (const Broken& c : cases) {
    Schedule s = c.schedule;
    c.edit(s);
    EXPECT_EQ(error_of(s), c.message) << c.what;
  }
}

TEST(PipelineValidator, ExchangesPairTheSameRanks) {
  // In 1F1B's steady state a send of an activation is followed by the
  // receive of a gradient from the same peer: one exchange.
  const Schedule s = make_schedule(ScheduleKind::OneFOneB, 4, 8);
  int exchanges = 0;
  for (int r = 0; r < s.ranks; ++r)
    for (size_t i = 0; i + 1 < s.actions[r].size(); ++i)
      if (s.actions[r][i].kind == ActionKind::SendActivation && s.actions[r][i + 1].kind == ActionKind::RecvGradient) {
        EXPECT_TRUE(is_exchange(s.actions[r][i], s.actions[r][i + 1]));
        EXPECT_EQ(peer_rank(s, r, s.actions[r][i]), peer_rank(s, r, s.actions[r][i + 1]));
        ++exchanges;
      }
  // One per steady-state forward of ranks r < P-1: M - (P-1-r) each.
  EXPECT_EQ(exchanges, (8 - 3) + (8 - 2) + (8 - 1));
}

}  // namespace
}  // namespace meshtrain::parallel::pipeline

namespace meshtrain::parallel::pipeline {
namespace {

TEST(PipelineValidator, EachRankMayHaveItsOwnCosts) {
  // One micro-batch through 2 stages, the second twice as slow: F0 F1 B1 B0
  // one after another, 1 + 2 + 2 + 1 = 6; each rank idles while the other works.
  const Schedule s = make_schedule(ScheduleKind::GPipe, 2, 1);
  const std::vector<ActionCosts> costs{{1, 1, 0}, {2, 2, 0}};
  const ScheduleReport r = validate_schedule(s, costs);
  EXPECT_DOUBLE_EQ(r.makespan, 6.0);
  EXPECT_DOUBLE_EQ(r.idle[0], 4.0);
  EXPECT_DOUBLE_EQ(r.idle[1], 2.0);
  EXPECT_DOUBLE_EQ(r.bubble, 6.0 / 12.0);
  const std::vector<ActionCosts> three(3);
  EXPECT_THROW(validate_schedule(s, three), Error);
}

TEST(PipelineValidator, MessagesTakeTheirTransferOneAfterAnother) {
  // One micro-batch: F0, 0.5 on the link, F1, B1, 0.5 back, B0.
  const ActionCosts half{1, 1, 0, 0.5};
  EXPECT_DOUBLE_EQ(validate_schedule(make_schedule(ScheduleKind::GPipe, 2, 1), half).makespan, 5.0);
  // Two micro-batches over a link slower than compute (3 a message): the
  // second activation waits for the first (arrives 4, then 7), rank 1
  // computes F, F, B, B by 10 and its gradients arrive at 12 and 15: 16 in
  // all (12 if the messages could share the link at full speed each).
  const ActionCosts slow{1, 1, 0, 3};
  const ScheduleReport r = validate_schedule(make_schedule(ScheduleKind::GPipe, 2, 2), slow);
  EXPECT_DOUBLE_EQ(r.makespan, 16.0);
  EXPECT_DOUBLE_EQ(r.idle[0], 12.0);
}

}  // namespace
}  // namespace meshtrain::parallel::pipeline
