#include "meshtrain/data/tokens/token_dataset.hpp"

#include <gtest/gtest.h>

#include "meshtrain/core/error.hpp"
#include "meshtrain/data/data_config.hpp"
#include "meshtrain/data/loader.hpp"
#include "../test_files.hpp"

namespace meshtrain {
namespace {

using testing::TempDir;
using testing::data_error;

std::vector<int32_t> iota_ids(int n, int mod = 1000) {
  std::vector<int32_t> ids(n);
  for (int i = 0; i < n; ++i) ids[i] = i % mod;
  return ids;
}

TEST(TokenDataset, WindowsStartEveryTTokensInEachFile) {
  TempDir dir;
  write_token_file(dir / "train.bin", iota_ids(101), TokenFileFormat::NanoGpt);
  write_token_file(dir / "val.bin", iota_ids(41), TokenFileFormat::Llmc);
  const int64_t T = 8;
  const TokenDataset data({.train_path = (dir / "train.bin").string(), .val_path = (dir / "val.bin").string(),
                           .seq_len = T, .vocab_size = 1000});
  EXPECT_EQ(data.kind(), DataKind::Tokens);
  EXPECT_EQ(data.num_samples(Split::Train), 100 / T);
  EXPECT_EQ(data.num_samples(Split::Validation), 40 / T);
  EXPECT_EQ(data.num_classes(), 1000);
  Batch batch;
  const std::vector<int64_t> idx = {0, 11};
  data.fill_batch(Split::Train, idx, batch);
  ASSERT_EQ(batch.tokens.size(), 2u * T);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t t = 0; t < T; ++t) {
      EXPECT_EQ(batch.tokens[b * T + t], idx[b] * T + t);
      EXPECT_EQ(batch.targets[b * T + t], idx[b] * T + t + 1);
    }
  data.fill_batch(Split::Validation, std::vector<int64_t>{4}, batch);
  EXPECT_EQ(batch.tokens[0], 32);
  EXPECT_EQ(batch.targets[T - 1], 40);
  EXPECT_THROW(data.fill_batch(Split::Validation, std::vector<int64_t>{5}, batch), Error);
}

TEST(TokenDataset, WithoutValPathSplitsTheTrainFile) {
  TempDir dir;
  write_token_file(dir / "all.bin", iota_ids(200), TokenFileFormat::Llmc);
  const TokenDataset data({.train_path = (dir / "all.bin").string(), .seq_len = 4, .val_fraction = 0.25});
  EXPECT_EQ(data.split_tokens(Split::Train).size(), 150u);
  EXPECT_EQ(data.split_tokens(Split::Validation).size(), 50u);
  EXPECT_EQ(data.split_tokens(Split::Validation)[0], 150);
}

TEST(TokenDataset, ErrorsNameTheFile) {
  TempDir dir;
  write_token_file(dir / "big.bin", iota_ids(100, 70), TokenFileFormat::NanoGpt);
  std::string msg = data_error([&] {
    TokenDataset({.train_path = (dir / "big.bin").string(), .seq_len = 4, .vocab_size = 64});
  });
  EXPECT_NE(msg.find("big.bin: token 64 at position 64 is not below model.vocab_size = 64"), std::string::npos) << msg;
  write_token_file(dir / "short.bin", iota_ids(5), TokenFileFormat::NanoGpt);
  msg = data_error([&] {
    TokenDataset({.train_path = (dir / "big.bin").string(), .val_path = (dir / "short.bin").string(), .seq_len = 8});
  });
  EXPECT_NE(msg.find("short.bin is too short: its validation split has 5 tokens"), std::string::npos) << msg;
  EXPECT_THROW(TokenDataset({.train_path = "", .seq_len = 8}), ConfigError);
}

TEST(TokenDataset, LoaderFromConfigFollowsTheOrder) {
  TempDir dir;
  write_token_file(dir / "t.bin", iota_ids(1000), TokenFileFormat::NanoGpt);
  DataConfig config{.kind = DataKind::Tokens, .val_fraction = 0.1, .seed = 3,
                    .train_path = (dir / "t.bin").string(), .vocab_size = 1000, .order = SampleOrder::Sequential};
  // Rank 1 of 2 with B = 2, T = 10: step s takes windows 4s+2, 4s+3.
  DataLoader loader = DataLoader::from_config(config, 10, 2, 1, 2);
  Batch batch;
  for (int s = 0; s < 3; ++s) {
    loader.next_batch(batch);
    EXPECT_EQ(batch.tokens[0], (4 * s + 2) * 10);
    EXPECT_EQ(batch.tokens[10], (4 * s + 3) * 10);
  }
}

}  // namespace
}  // namespace meshtrain
