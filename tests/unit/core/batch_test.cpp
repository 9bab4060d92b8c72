// copy_samples: one micro-batch of a batch.
#include "meshtrain/core/batch.hpp"

#include <gtest/gtest.h>

namespace meshtrain {
namespace {

TEST(Batch, CopySamplesTakesWholeRowsOfEveryBuffer) {
  Batch full;
  full.batch_size = 4;
  full.seq_len = 3;
  full.tokens.ensure(12);
  full.targets.ensure(12);
  for (int i = 0; i < 12; ++i) full.tokens.data()[i] = i, full.targets.data()[i] = 100 + i;
  Batch micro;
  copy_samples(full, 2, 2, micro);  // rows 2 and 3
  EXPECT_EQ(micro.batch_size, 2);
  EXPECT_EQ(micro.seq_len, 3);
  ASSERT_EQ(micro.tokens.size(), 6u);
  ASSERT_EQ(micro.targets.size(), 6u);
  EXPECT_EQ(micro.pixels.size(), 0u);
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(micro.tokens.data()[i], 6 + i);
    EXPECT_EQ(micro.targets.data()[i], 106 + i);
  }
}

TEST(Batch, CopySamplesOfImages) {
  Batch full;
  full.batch_size = 3;
  full.image_h = full.image_w = 2;
  full.pixels.ensure(12);
  full.targets.ensure(3);
  for (int i = 0; i < 12; ++i) full.pixels.data()[i] = static_cast<float>(i);
  for (int i = 0; i < 3; ++i) full.targets.data()[i] = 7 + i;
  Batch micro;
  copy_samples(full, 1, 1, micro);
  EXPECT_EQ(micro.image_h, 2);
  ASSERT_EQ(micro.pixels.size(), 4u);
  EXPECT_EQ(micro.pixels.data()[0], 4.0f);
  ASSERT_EQ(micro.targets.size(), 1u);
  EXPECT_EQ(micro.targets.data()[0], 8);
}

}  // namespace
}  // namespace meshtrain
