// The whole GPT split over T ranks (threads): blocks by heads and hidden
// units, wte by vocabulary rows with the loss over the logits' vocabulary
// shards, against the serial GPT with the same seed: the loss (the same on
// every rank), the accuracy count and every gradient slice agree, T = 1, 2, 4.
#include <gtest/gtest.h>

#include "meshtrain/core/error.hpp"
#include "meshtrain/nn/gpt.hpp"
#include "meshtrain/nn/vit.hpp"
#include "tp_test_util.hpp"

namespace meshtrain::parallel {
namespace {

const GptConfig kConfig{2, 16, 4, 8, 64};  // layers, width, heads, block, vocabulary

void fill_batch(Batch& batch, int64_t B = 2, int64_t T = 8, uint64_t seed = 3) {
  batch.batch_size = B;
  batch.seq_len = T;
  batch.tokens.ensure(B * T);
  batch.targets.ensure(B * T);
  Rng rng(seed);
  for (int64_t i = 0; i < B * T; ++i) {
    batch.tokens[i] = static_cast<int32_t>(rng.below(64));
    batch.targets[i] = static_cast<int32_t>(rng.below(64));
  }
}

TEST(ParallelGpt, LossAndGradientsEqualTheSerialModel) {
  Batch batch;
  fill_batch(batch);
  Gpt serial(kConfig);
  Rng rng(11);
  serial.init_parameters(rng);
  const ForwardResult want = serial.forward(batch);
  serial.backward();

  for (int ways : {1, 2, 4}) {
    SCOPED_TRACE("T = " + std::to_string(ways));
    std::vector<ForwardResult> got(static_cast<size_t>(ways));
    std::vector<size_t> bad_grads(static_cast<size_t>(ways));
    std::vector<Shape> wte_shapes(static_cast<size_t>(ways));
    tp_test::run_tensor_ranks(ways, [&](int r, TensorParallelGroup& tp) {
      Gpt gpt(kConfig, &tp);
      Rng init(11);
      gpt.init_parameters(init);
      got[size_t(r)] = gpt.forward(batch);
      gpt.backward();
      for (const ParamView& v : gpt.store().views())
        bad_grads[size_t(r)] += tp_test::grad_slice_mismatches(gpt.store(), v, serial.store());
      wte_shapes[size_t(r)] = gpt.store().find("wte.weight")->shape;
    });
    for (int r = 0; r < ways; ++r) {
      SCOPED_TRACE("rank " + std::to_string(r));
      EXPECT_NEAR(got[size_t(r)].loss, want.loss, 1e-5f * want.loss);
      EXPECT_EQ(got[size_t(r)].loss, got[0].loss) << "every rank of the group has the same loss";
      EXPECT_EQ(got[size_t(r)].correct, want.correct);
      EXPECT_EQ(bad_grads[size_t(r)], 0u);
      EXPECT_EQ(wte_shapes[size_t(r)], (Shape{kConfig.vocab_size / ways, kConfig.n_embd})) << "wte split by rows";
    }
  }
}

TEST(ParallelGpt, AVocabularyThatDoesNotSplitIsAConfigError) {
  GptConfig config = kConfig;
  config.vocab_size = 65;
  const auto errors = tp_test::rank_errors<ConfigError>(2, [&](int, TensorParallelGroup& tp) { Gpt gpt(config, &tp); });
  for (const auto& e : errors)
    EXPECT_NE(e.find("vocab_size 65 is not divisible by the 2 tensor-parallel ways"), std::string::npos) << e;
}

// Sequence parallelism: batches of 2 x 6 tokens, so at T = 4 a rank's 3 rows
// cross from one sequence into the next.
std::vector<Batch> seq_batches(int count) {
  std::vector<Batch> batches(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) fill_batch(batches[size_t(i)], 2, 6, 3 + uint64_t(i));
  return batches;
}

struct SeqRankResult {
  std::vector<ForwardResult> results;  // one per batch
  size_t bad_grads = 0;                // gradient elements off the serial model's
  std::vector<float> replicated;       // every replicated tensor's gradient, in view order
};

// forward + backward of each batch in turn (backward adds into the
// gradients: micro-batches), on the serial GPT and on `ways` sequence-parallel ranks.
std::vector<SeqRankResult> run_sequence_parallel(int ways, const std::vector<Batch>& batches,
                                                 std::vector<ForwardResult>& serial_results) {
  Gpt serial(kConfig);
  Rng rng(11);
  serial.init_parameters(rng);
  serial_results.clear();
  for (const Batch& b : batches) {
    serial_results.push_back(serial.forward(b));
    serial.backward();
  }
  std::vector<SeqRankResult> ranks(static_cast<size_t>(ways));
  tp_test::run_tensor_ranks(
      ways,
      [&](int r, TensorParallelGroup& tp) {
        Gpt gpt(kConfig, &tp);
        Rng init(11);
        gpt.init_parameters(init);
        SeqRankResult& mine = ranks[size_t(r)];
        for (const Batch& b : batches) {
          mine.results.push_back(gpt.forward(b));
          gpt.backward();
        }
        for (const ParamView& v : gpt.store().views()) {
          mine.bad_grads += tp_test::grad_slice_mismatches(gpt.store(), v, serial.store());
          const float* g = gpt.store().grads().data() + v.offset;
          if (v.placement.replicated()) mine.replicated.insert(mine.replicated.end(), g, g + v.numel);
        }
      },
      /*sequence_parallel=*/true);
  return ranks;
}

// The loss over every row, the same on every rank; every gradient slice,
// the layernorms' (summed over the group) and wpe's included; replicated
// gradients the same bits on every rank.
TEST(ParallelGpt, SequenceParallelLossAndGradientsEqualTheSerialModel) {
  const auto batches = seq_batches(1);
  for (int ways : {1, 2, 4}) {
    SCOPED_TRACE("T = " + std::to_string(ways));
    std::vector<ForwardResult> want;
    const auto ranks = run_sequence_parallel(ways, batches, want);
    for (int r = 0; r < ways; ++r) {
      SCOPED_TRACE("rank " + std::to_string(r));
      const SeqRankResult& got = ranks[size_t(r)];
      EXPECT_NEAR(got.results[0].loss, want[0].loss, 1e-5f * want[0].loss);
      EXPECT_EQ(got.results[0].loss, ranks[0].results[0].loss) << "every rank of the group has the same loss";
      EXPECT_EQ(got.results[0].correct, want[0].correct);
      EXPECT_EQ(got.results[0].count, want[0].count);
      EXPECT_EQ(got.bad_grads, 0u);
      EXPECT_TRUE(got.replicated == ranks[0].replicated) << "replicated gradients differ between ranks";
    }
  }
}

// Two micro-batches: each backward adds its (group-summed) layernorm
// gradients onto what the first left, as the serial model adds.
TEST(ParallelGpt, SequenceParallelGradientsAccumulateOverMicroBatches) {
  const auto batches = seq_batches(2);
  for (int ways : {2, 4}) {
    SCOPED_TRACE("T = " + std::to_string(ways));
    std::vector<ForwardResult> want;
    const auto ranks = run_sequence_parallel(ways, batches, want);
    for (int r = 0; r < ways; ++r) {
      SCOPED_TRACE("rank " + std::to_string(r));
      EXPECT_NEAR(ranks[size_t(r)].results[1].loss, want[1].loss, 1e-5f * want[1].loss);
      EXPECT_EQ(ranks[size_t(r)].bad_grads, 0u);
      EXPECT_TRUE(ranks[size_t(r)].replicated == ranks[0].replicated) << "replicated gradients differ between ranks";
    }
  }
}

TEST(ParallelGpt, SequenceParallelTokensThatDoNotSplitAreAnError) {
  Batch batch;
  fill_batch(batch, 1, 6);
  const auto errors = tp_test::rank_errors(
      4,
      [&](int, TensorParallelGroup& tp) {
        Gpt gpt(kConfig, &tp);
        gpt.forward(batch);
      },
      /*sequence_parallel=*/true);
  for (const auto& e : errors)
    EXPECT_NE(e.find("B x T = 1 x 6 = 6 tokens over the 4 tensor-parallel ways"), std::string::npos) << e;
}

TEST(ParallelGpt, SequenceParallelismIsBuiltForGptOnly) {
  VitConfig config;
  config.image_size = 8;
  config.patch_size = 4;
  config.n_layer = 1;
  config.n_embd = 16;
  config.n_head = 2;
  const auto errors =
      tp_test::rank_errors<ConfigError>(2, [&](int, TensorParallelGroup& tp) { Vit vit(config, &tp); }, true);
  for (const auto& e : errors) EXPECT_NE(e.find("sequence parallelism is built for gpt"), std::string::npos) << e;
}

// Generation is one process: a group of one generates as the serial model
// does; a larger group, whose ranks hold V/T logits each, says so.
TEST(ParallelGpt, LastLogitsNeedTheWholeVocabulary) {
  const std::vector<int32_t> prompt = {5, 17, 63, 2};
  Gpt serial(kConfig);
  Rng rng(11);
  serial.init_parameters(rng);
  const auto logits = serial.last_logits(prompt);
  const std::vector<float> want(logits.begin(), logits.end());

  tp_test::run_tensor_ranks(1, [&](int, TensorParallelGroup& tp) {
    Gpt gpt(kConfig, &tp);
    Rng init(11);
    gpt.init_parameters(init);
    const auto got = gpt.last_logits(prompt);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(tp_test::mismatches(got.data(), want.data(), want.size()), 0u);
  });
  const auto errors = tp_test::rank_errors(2, [&](int, TensorParallelGroup& tp) {
    Gpt gpt(kConfig, &tp);
    gpt.last_logits(prompt);
  });
  for (const auto& e : errors) EXPECT_NE(e.find("generation runs in one process"), std::string::npos) << e;
}

}  // namespace
}  // namespace meshtrain::parallel
