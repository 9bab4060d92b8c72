// The whole GPT with its blocks split over T ranks (threads) against the
// serial GPT with the same seed: the loss (the same on every rank) and every
// gradient slice agree, T = 2 and 4.
#include <gtest/gtest.h>

#include "meshtrain/nn/gpt.hpp"
#include "tp_test_util.hpp"

namespace meshtrain::parallel {
namespace {

const GptConfig kConfig{2, 16, 4, 8, 64};  // layers, width, heads, block, vocabulary

void fill_batch(Batch& batch) {
  batch.batch_size = 2;
  batch.seq_len = 8;
  batch.tokens.ensure(16);
  batch.targets.ensure(16);
  Rng rng(3);
  for (int i = 0; i < 16; ++i) {
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
  const float serial_loss = serial.forward(batch).loss;
  serial.backward();

  for (int ways : {2, 4}) {
    SCOPED_TRACE("T = " + std::to_string(ways));
    std::vector<float> losses(static_cast<size_t>(ways));
    std::vector<size_t> bad_grads(static_cast<size_t>(ways));
    tp_test::run_tensor_ranks(ways, [&](int r, TensorParallelGroup& tp) {
      Gpt gpt(kConfig, &tp);
      Rng init(11);
      gpt.init_parameters(init);
      losses[size_t(r)] = gpt.forward(batch).loss;
      gpt.backward();
      for (const ParamView& v : gpt.store().views())
        bad_grads[size_t(r)] += tp_test::grad_slice_mismatches(gpt.store(), v, serial.store());
    });
    for (int r = 0; r < ways; ++r) {
      EXPECT_NEAR(losses[size_t(r)], serial_loss, 1e-5f * serial_loss) << "rank " << r;
      EXPECT_EQ(losses[size_t(r)], losses[0]) << "every rank of the group has the same loss";
      EXPECT_EQ(bad_grads[size_t(r)], 0u) << "rank " << r;
    }
  }
}

}  // namespace
}  // namespace meshtrain::parallel
