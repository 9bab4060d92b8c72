// Every schedule run by the executor over P pipeline ranks (threads, each a
// Gpt holding its pieces) against the serial GPT accumulating the same
// micro-batches: the loss on the last stage and every gradient (the tied
// wte's as the first and last stage's sum) agree, and each rank holds no
// more micro-batches' activations than the validator counts.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "meshtrain/comm/device/host_staged_collectives.hpp"
#include "meshtrain/comm/group/process_group.hpp"
#include "meshtrain/comm/transport/inproc/inproc_transport.hpp"
#include "meshtrain/core/error.hpp"
#include "meshtrain/nn/gpt.hpp"
#include "meshtrain/parallel/pipeline/executor.hpp"
#include "meshtrain/parallel/pipeline/schedule.hpp"
#include "meshtrain/parallel/pipeline/stage_split.hpp"
#include "meshtrain/parallel/pipeline/validator.hpp"
#include "thread_ranks.hpp"

namespace meshtrain::parallel::pipeline {
namespace {

// The pipeline group's device collectives for a model in host memory.
std::unique_ptr<comm::DeviceCollectives> on_host(comm::ProcessGroup& group) {
  return std::make_unique<comm::HostStagedCollectives>(group, nullptr);
}

const GptConfig kConfig{8, 16, 2, 8, 64};  // layers, width, heads, block, vocabulary
constexpr int64_t kMicroRows = 2;          // sequences per micro-batch

std::vector<Batch> make_micro_batches(int M) {
  std::vector<Batch> batches(static_cast<size_t>(M));
  Rng rng(5);
  for (Batch& b : batches) {
    b.batch_size = kMicroRows;
    b.seq_len = kConfig.block_size;
    b.tokens.ensure(kMicroRows * b.seq_len);
    b.targets.ensure(kMicroRows * b.seq_len);
    for (int64_t i = 0; i < kMicroRows * b.seq_len; ++i) {
      b.tokens[i] = static_cast<int32_t>(rng.below(64));
      b.targets[i] = static_cast<int32_t>(rng.below(64));
    }
  }
  return batches;
}

struct RankOutcome {
  PipelineLoss loss;
  std::vector<std::pair<std::string, std::vector<float>>> grads;  // name -> gradient
  size_t peak_slots = 0;
};

// Runs `schedule` on P threads; rank r's outcome at [r].
std::vector<RankOutcome> run_pipeline(const Schedule& schedule, const std::vector<Batch>& batches,
                                      Precision wire = Precision::Fp32) {
  const int P = schedule.ranks, V = schedule.chunks;
  const std::vector<int64_t> counts = stage_layer_counts(kConfig.n_layer, P * V);
  std::vector<RankOutcome> out(static_cast<size_t>(P));
  std::vector<std::string> errors(static_cast<size_t>(P));
  testing::on_inproc_ranks(P, [&](int r, comm::ProcessGroup& group) {
    try {
      Gpt gpt(kConfig, nullptr, rank_pieces(counts, P, V, r));
      Rng init(11);
      gpt.init_parameters(init);
      PipelineExecutor executor(schedule, r, gpt, on_host(group), wire);
      out[size_t(r)].loss = executor.run(batches, {.before = [](int, bool) {}, .after = [] {}});
      for (const ParamView& v : gpt.store().views())
        out[size_t(r)].grads.emplace_back(
            v.name, std::vector<float>(gpt.store().grads().begin() + std::ptrdiff_t(v.offset),
                                       gpt.store().grads().begin() + std::ptrdiff_t(v.offset + v.numel)));
      out[size_t(r)].peak_slots = executor.peak_slots();
    } catch (const std::exception& e) {
      errors[size_t(r)] = e.what();
    }
  });
  for (int r = 0; r < P; ++r) EXPECT_EQ(errors[size_t(r)], "") << "rank " << r;
  return out;
}

struct Case {
  ScheduleKind kind;
  int P, M, V;
};

// A bf16 wire (parallel.reduce_dtype): the activations and gradients
// between stages arrive rounded, so the step is not fp32's bit for bit but
// within bf16's rounding of it (2^-9 relative on what crosses; the loss and
// the gradients move by far less than 1%).
TEST(PipelineExecutor, Bf16WireStaysWithinBf16RoundingOfFp32) {
  const Schedule schedule = make_schedule(ScheduleKind::OneFOneB, 2, 4, 1);
  const std::vector<Batch> batches = make_micro_batches(4);
  const std::vector<RankOutcome> fp32 = run_pipeline(schedule, batches);
  const std::vector<RankOutcome> bf16 = run_pipeline(schedule, batches, Precision::Bf16);
  if (HasFailure()) return;
  const double loss = fp32.back().loss.loss_sum;
  EXPECT_NE(bf16.back().loss.loss_sum, loss) << "the stage boundary should round";
  EXPECT_NEAR(bf16.back().loss.loss_sum, loss, 1e-3 * loss);
  for (size_t r = 0; r < fp32.size(); ++r)
    for (size_t t = 0; t < fp32[r].grads.size(); ++t) {
      const auto& [name, want] = fp32[r].grads[t];
      const std::vector<float>& got = bf16[r].grads[t].second;
      double diff = 0, norm = 0;
      for (size_t i = 0; i < want.size(); ++i) {
        diff += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
        norm += double(want[i]) * want[i];
      }
      EXPECT_LE(std::sqrt(diff), 1e-2 * std::sqrt(norm) + 1e-7) << "rank " << r << " " << name;
    }
}

TEST(PipelineExecutor, EverySchedulesGradientsEqualTheSerialModel) {
  const Case cases[] = {
      {ScheduleKind::GPipe, 2, 4, 1},      {ScheduleKind::GPipe, 4, 4, 1},      {ScheduleKind::OneFOneB, 2, 4, 1},
      {ScheduleKind::OneFOneB, 4, 4, 1},   {ScheduleKind::OneFOneB, 4, 6, 1},   {ScheduleKind::OneFOneB, 4, 2, 1},
      {ScheduleKind::Interleaved, 2, 4, 2}, {ScheduleKind::Interleaved, 4, 4, 2}, {ScheduleKind::Interleaved, 2, 2, 4},
      {ScheduleKind::ZeroBubble, 2, 4, 1}, {ScheduleKind::ZeroBubble, 4, 4, 1}, {ScheduleKind::ZeroBubble, 4, 8, 1},
  };
  for (const Case& c : cases) {
    const Schedule schedule = make_schedule(c.kind, c.P, c.M, c.V);
    SCOPED_TRACE(enum_string(c.kind) + " P=" + std::to_string(c.P) + " M=" + std::to_string(c.M) +
                 " V=" + std::to_string(c.V));
    const std::vector<Batch> batches = make_micro_batches(c.M);
    Gpt serial(kConfig);
    Rng init(11);
    serial.init_parameters(init);
    double want_loss = 0;
    for (const Batch& b : batches) {
      want_loss += serial.forward(b).loss;
      serial.backward();
    }
    const std::vector<RankOutcome> got = run_pipeline(schedule, batches);
    if (HasFailure()) return;
    EXPECT_NEAR(got.back().loss.loss_sum, want_loss, 1e-5 * want_loss) << "the loss lives on the last stage";
    for (int r = 0; r + 1 < c.P; ++r) EXPECT_EQ(got[size_t(r)].loss.count, 0) << "rank " << r;
    // Every tensor on exactly one rank, but wte on the first and the last.
    std::map<std::string, std::vector<float>> sum;
    for (const RankOutcome& o : got)
      for (const auto& [name, grad] : o.grads) {
        auto [it, fresh] = sum.emplace(name, grad);
        if (fresh) continue;
        EXPECT_EQ(name, "wte.weight") << "only the tied embedding is held twice";
        for (size_t i = 0; i < grad.size(); ++i) it->second[i] += grad[i];
      }
    EXPECT_EQ(sum.size(), serial.store().views().size());
    for (const ParamView& v : serial.store().views()) {
      const auto& g = sum.at(v.name);
      size_t bad = 0;
      for (size_t i = 0; i < v.numel; ++i) {
        const float want = serial.store().grads()[v.offset + i];
        bad += !(std::abs(g[i] - want) <= 1e-5f * (std::abs(want) + 1e-3f));
      }
      EXPECT_EQ(bad, 0u) << v.name;
    }
    const ScheduleReport report = validate_schedule(schedule);
    for (int r = 0; r < c.P; ++r) {
      // A slot is held from the forward to the end of the backward, W included.
      const int bound = report.peak_in_flight[size_t(r)] + report.peak_weight_pending[size_t(r)];
      EXPECT_LE(got[size_t(r)].peak_slots, size_t(bound)) << "rank " << r;
      const std::vector<int> needed = slots_needed(schedule, r);
      EXPECT_EQ(got[size_t(r)].peak_slots, size_t(*std::max_element(needed.begin(), needed.end())))
          << "rank " << r << ": the executor takes the slots slots_needed foretells";
      if (c.kind == ScheduleKind::GPipe) {
        EXPECT_EQ(got[size_t(r)].peak_slots, size_t(c.M)) << "GPipe holds all M";
      }
    }
  }
}

TEST(PipelineExecutor, FirstStageOfOneFOneBHoldsPMicroBatches) {
  const Schedule schedule = make_schedule(ScheduleKind::OneFOneB, 4, 8);
  const std::vector<RankOutcome> got = run_pipeline(schedule, make_micro_batches(8));
  ASSERT_EQ(got.size(), 4u);
  for (int r = 0; r < 4; ++r) EXPECT_EQ(got[size_t(r)].peak_slots, size_t(4 - r)) << "rank " << r;
}

TEST(PipelineExecutor, ForwardOnlyGivesTheSerialLoss) {
  const std::vector<Batch> batches = make_micro_batches(3);
  Gpt serial(kConfig);
  Rng init(11);
  serial.init_parameters(init);
  double want = 0;
  for (const Batch& b : batches) want += serial.forward(b).loss;
  for (const auto& [P, V] : {std::pair{2, 1}, std::pair{2, 2}, std::pair{4, 1}}) {
    const std::vector<int64_t> counts = stage_layer_counts(kConfig.n_layer, P * V);
    std::vector<double> loss(static_cast<size_t>(P));
    testing::on_inproc_ranks(P, [&](int r, comm::ProcessGroup& group) {
      Gpt gpt(kConfig, nullptr, rank_pieces(counts, P, V, r));
      Rng rng(11);
      gpt.init_parameters(rng);
      const Schedule schedule = make_schedule(V > 1 ? ScheduleKind::Interleaved : ScheduleKind::OneFOneB, P, 4, V);
      loss[size_t(r)] = PipelineExecutor(schedule, r, gpt, on_host(group)).forward_only(batches).loss_sum;
    });
    EXPECT_NEAR(loss.back(), want, 1e-5 * want) << "P=" << P << " V=" << V;
  }
}

TEST(PipelineExecutor, RefusesPiecesThatDoNotFitTheSchedule) {
  Gpt whole(kConfig);
  try {
    PipelineExecutor(make_schedule(ScheduleKind::Interleaved, 2, 2, 2), 0, whole, nullptr);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "pipeline executor: the schedule runs 2 chunk(s) on rank 0, but the model holds 1 piece(s)");
  }
}

TEST(StageSplit, BalancedCountsAndClearErrors) {
  EXPECT_EQ(stage_layer_counts(8, 4), (std::vector<int64_t>{2, 2, 2, 2}));
  EXPECT_EQ(stage_layer_counts(6, 4), (std::vector<int64_t>{1, 2, 2, 1}));
  EXPECT_EQ(stage_layer_counts(7, 4), (std::vector<int64_t>{1, 2, 2, 2}));
  EXPECT_EQ(stage_layer_counts(2, 2), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(stage_layer_counts(1, 2), (std::vector<int64_t>{0, 1}));
  const std::vector<int64_t> given{3, 1};
  EXPECT_EQ(stage_layer_counts(4, 2, given), given);
  try {
    const std::vector<int64_t> bad{3, 2};
    stage_layer_counts(4, 2, bad);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(), "parallel.stage_layers = [3, 2] must list 2 layer counts (pipeline x virtual_stages), none "
                           "negative, adding up to model.n_layer = 4");
  }
  try {
    stage_layer_counts(1, 4);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(), "pipeline: stage 2 of 4 would hold no layer (stage layers [0, 1, 0, 0], model.n_layer = 1): "
                           "use fewer stages or more layers");
  }
  const std::vector<int64_t> counts{1, 2, 2, 3};
  const auto pieces = rank_pieces(counts, 2, 2, 1);  // stages 1 and 3
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(pieces[0].first_layer, 1);
  EXPECT_EQ(pieces[0].end_layer, 3);
  EXPECT_FALSE(pieces[0].embedding || pieces[0].head);
  EXPECT_EQ(pieces[1].first_layer, 5);
  EXPECT_EQ(pieces[1].end_layer, 8);
  EXPECT_TRUE(pieces[1].head);
}

}  // namespace
}  // namespace meshtrain::parallel::pipeline
