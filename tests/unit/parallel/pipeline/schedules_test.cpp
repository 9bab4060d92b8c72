// Every schedule generator against the validator: accepted for every
// P <= 8 and M <= 32 (interleaved: V in 2..4, M % P == 0), with the bubble
// each paper predicts and the activation memory each promises.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "meshtrain/core/error.hpp"
#include "meshtrain/parallel/pipeline/schedule.hpp"
#include "meshtrain/parallel/pipeline/validator.hpp"

namespace meshtrain::parallel::pipeline {
namespace {

constexpr int kMaxRanks = 8, kMaxMicroBatches = 32;

// (P-1)/(units*M + P-1): the classic bubble with every compute of equal size
// per micro-batch; units = 1 for GPipe and 1F1B, V for interleaved.
double classic_bubble(int P, int M, int units) { return double(P - 1) / (units * M + P - 1); }

ScheduleReport checked(ScheduleKind kind, int P, int M, int V, const ActionCosts& costs = {}) {
  SCOPED_TRACE(enum_string(kind) + " P=" + std::to_string(P) + " M=" + std::to_string(M) + " V=" + std::to_string(V));
  return validate_schedule(make_schedule(kind, P, M, V), costs);
}

TEST(PipelineSchedules, GPipeBubbleAndMemory) {
  for (int P = 1; P <= kMaxRanks; ++P)
    for (int M = 1; M <= kMaxMicroBatches; ++M) {
      const ScheduleReport r = checked(ScheduleKind::GPipe, P, M, 1);
      EXPECT_NEAR(r.bubble, classic_bubble(P, M, 1), 1e-9) << "P=" << P << " M=" << M;
      for (int rank = 0; rank < P; ++rank) EXPECT_EQ(r.peak_in_flight[rank], M);
    }
}

TEST(PipelineSchedules, OneFOneBBubbleAndMemory) {
  for (int P = 1; P <= kMaxRanks; ++P)
    for (int M = 1; M <= kMaxMicroBatches; ++M) {
      const ScheduleReport r = checked(ScheduleKind::OneFOneB, P, M, 1);
      EXPECT_NEAR(r.bubble, classic_bubble(P, M, 1), 1e-9) << "P=" << P << " M=" << M;
      EXPECT_EQ(r.peak_in_flight[0], std::min(P, M));
      for (int rank = 0; rank < P; ++rank) EXPECT_LE(r.peak_in_flight[rank], std::min(P - rank, M));
    }
}

// The classic formulas assume only that every stage (every chunk) costs the
// same: they hold whatever the backward costs relative to the forward.
TEST(PipelineSchedules, ClassicBubbleHoldsForOtherCosts) {
  const ActionCosts slow_backward{1.0, 2.0, 1.5};
  for (int P : {2, 5, 8})
    for (int M : {P, 2 * P, 4 * P}) {
      for (ScheduleKind kind : {ScheduleKind::GPipe, ScheduleKind::OneFOneB})
        EXPECT_NEAR(checked(kind, P, M, 1, slow_backward).bubble, classic_bubble(P, M, 1), 1e-9)
            << enum_string(kind) << " P=" << P << " M=" << M;
      EXPECT_NEAR(checked(ScheduleKind::Interleaved, P, M, 3, slow_backward).bubble, classic_bubble(P, M, 3), 1e-9)
          << "interleaved P=" << P << " M=" << M;
    }
}

TEST(PipelineSchedules, InterleavedBubble) {
  for (int V = 2; V <= 4; ++V)
    for (int P = 2; P <= kMaxRanks; ++P)
      for (int M = P; M <= kMaxMicroBatches; M += P) {
        const ScheduleReport r = checked(ScheduleKind::Interleaved, P, M, V);
        EXPECT_NEAR(r.bubble, classic_bubble(P, M, V), 1e-9) << "P=" << P << " M=" << M << " V=" << V;
      }
}

TEST(PipelineSchedules, ZeroBubbleH1) {
  for (int P = 1; P <= kMaxRanks; ++P)
    for (int M = 1; M <= kMaxMicroBatches; ++M) {
      const ScheduleReport zb = checked(ScheduleKind::ZeroBubble, P, M, 1);
      const ScheduleReport one_f_one_b = checked(ScheduleKind::OneFOneB, P, M, 1);
      if (P > 1) {
        EXPECT_LT(zb.bubble, one_f_one_b.bubble) << "P=" << P << " M=" << M;
      }
      // Qi et al.: (P-1)(F+B-W) idle per rank, (P-1)/(3M+P-1) with F = B = W.
      if (M >= P) {
        EXPECT_NEAR(zb.bubble, double(P - 1) / (3 * M + P - 1), 1e-9) << "P=" << P << " M=" << M;
      }
      EXPECT_EQ(zb.peak_in_flight[0], std::min(P, M));
      for (int rank = 0; rank < P; ++rank) EXPECT_LE(zb.peak_in_flight[rank], one_f_one_b.peak_in_flight[rank]);
    }
}

TEST(PipelineSchedules, NamesRoundTrip) {
  for (const auto& n : kScheduleKindNames) EXPECT_EQ(parse_enum<ScheduleKind>(n.name), n.value);
  EXPECT_EQ(enum_choices<ScheduleKind>(), "gpipe, 1f1b, interleaved, zero_bubble");
}

// make_schedule rejects what no generator can build, naming the value.
TEST(PipelineSchedules, InvalidArguments) {
  auto message = [](ScheduleKind kind, int P, int M, int V) -> std::string {
    try {
      make_schedule(kind, P, M, V);
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "accepted";
  };
  EXPECT_NE(message(ScheduleKind::GPipe, 0, 4, 1).find("ranks must be >= 1, got 0"), std::string::npos);
  EXPECT_NE(message(ScheduleKind::OneFOneB, 2, 0, 1).find("micro-batches must be >= 1, got 0"), std::string::npos);
  EXPECT_NE(message(ScheduleKind::Interleaved, 2, 4, 0).find("virtual stages per rank must be >= 1"), std::string::npos);
  EXPECT_NE(message(ScheduleKind::ZeroBubble, 2, 4, 2).find("zero_bubble: takes 1 virtual stage"), std::string::npos);
  EXPECT_NE(message(ScheduleKind::Interleaved, 4, 6, 2).find("(6) must be a multiple of the pipeline ranks (4)"),
            std::string::npos);
  EXPECT_NE(message(ScheduleKind::Interleaved, 1, 4, 2).find("needs at least 2 pipeline ranks"), std::string::npos);
  EXPECT_EQ(message(ScheduleKind::Interleaved, 4, 8, 1), "accepted");  // V = 1: plain 1F1B order
}

}  // namespace
}  // namespace meshtrain::parallel::pipeline
