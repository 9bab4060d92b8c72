#include "meshtrain/data/loader.hpp"

#include <gtest/gtest.h>

#include "meshtrain/core/error.hpp"
#include "meshtrain/data/text_dataset.hpp"
#include "test_files.hpp"

namespace meshtrain {
namespace {

using testing::TempDir;
using testing::write_text;

// Text whose T-byte windows are easy to tell apart: byte k is k mod 251.
std::string corpus(size_t n) {
  std::string s(n, '\0');
  for (size_t k = 0; k < n; ++k) s[k] = static_cast<char>(k % 251);
  return s;
}

TEST(DataLoader, TwoRanksTogetherSeeWhatOneProcessSees) {
  TempDir dir;
  write_text(dir / "c.txt", corpus(5000));
  DataConfig config{DataKind::Text, (dir / "c.txt").string(), 0.1, 17};
  const int64_t T = 8, B = 4;
  DataLoader one = DataLoader::from_config(config, T, 2 * B, 0, 1);
  DataLoader r0 = DataLoader::from_config(config, T, B, 0, 2);
  DataLoader r1 = DataLoader::from_config(config, T, B, 1, 2);

  Batch whole, half0, half1;
  for (int step = 0; step < 5; ++step) {
    one.next_batch(whole);
    r0.next_batch(half0);
    r1.next_batch(half1);
    ASSERT_EQ(whole.tokens.size(), static_cast<size_t>(2 * B * T));
    for (int64_t k = 0; k < B * T; ++k) {
      EXPECT_EQ(half0.tokens[k], whole.tokens[k]);
      EXPECT_EQ(half1.tokens[k], whole.tokens[B * T + k]);
      EXPECT_EQ(half1.targets[k], whole.targets[B * T + k]);
    }
  }
  EXPECT_EQ(r0.state(), one.state());
}

TEST(DataLoader, NoAllocationAfterTheFirstBatch) {
  TempDir dir;
  write_text(dir / "c.txt", corpus(5000));
  DataLoader loader(std::make_shared<TextDataset>(dir / "c.txt", 16, 0.1), 4, 0, 1, 0);
  Batch batch;
  loader.next_batch(batch);
  const int32_t* tokens = batch.tokens.data();
  for (int step = 0; step < 100; ++step) loader.next_batch(batch);  // crosses epochs
  EXPECT_EQ(batch.tokens.data(), tokens);
}

TEST(DataLoader, RestoreContinuesTheSameBatches) {
  TempDir dir;
  write_text(dir / "c.txt", corpus(3000));
  DataConfig config{DataKind::Text, (dir / "c.txt").string(), 0.2, 5};
  DataLoader a = DataLoader::from_config(config, 8, 4, 0, 1);
  Batch batch, again;
  for (int i = 0; i < 7; ++i) a.next_batch(batch);
  const SamplerState saved = a.state();
  a.next_batch(batch);

  DataLoader b = DataLoader::from_config(config, 8, 4, 0, 1);
  b.restore(saved);
  b.next_batch(again);
  ASSERT_EQ(batch.tokens.size(), again.tokens.size());
  for (size_t k = 0; k < batch.tokens.size(); ++k) EXPECT_EQ(batch.tokens[k], again.tokens[k]);
}

// Rank r of n evaluates slice r of each global validation batch of n*B
// windows, in file order, so the ranks together see one process's batches.
TEST(DataLoader, ValidationBatchesAreInOrderAndSplitAcrossRanks) {
  TempDir dir;
  const std::string text = corpus(1000);
  write_text(dir / "c.txt", text);
  DataConfig config{DataKind::Text, (dir / "c.txt").string(), 0.5, 1};
  const int64_t T = 10, B = 3;
  DataLoader r0 = DataLoader::from_config(config, T, B, 0, 2);
  DataLoader r1 = DataLoader::from_config(config, T, B, 1, 2);
  EXPECT_EQ(r0.num_validation_batches(), ((500 - 1) / T) / (2 * B));
  Batch b0, b1;
  r0.validation_batch(1, b0);
  r1.validation_batch(1, b1);
  for (int64_t k = 0; k < B * T; ++k) {
    // Global batch 1 starts at window 2B: rank 0 has windows 2B..3B-1, rank 1 3B..4B-1.
    EXPECT_EQ(b0.tokens[k], static_cast<unsigned char>(text[500 + 2 * B * T + k]));
    EXPECT_EQ(b1.tokens[k], static_cast<unsigned char>(text[500 + 3 * B * T + k]));
  }
  EXPECT_THROW(r0.validation_batch(r0.num_validation_batches(), b0), ConfigError);
}

TEST(DataConfig, FactoryNamesMissingFiles) {
  EXPECT_EQ(parse_enum<DataKind>("imagenet"), std::nullopt);
  TempDir dir;
  try {
    make_dataset(DataConfig{DataKind::Text, (dir / "none.txt").string(), 0.1, 0}, 8);
    FAIL() << "no DataError";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("none.txt"), std::string::npos);
  }
  EXPECT_THROW(make_dataset(DataConfig{DataKind::FashionMnist, (dir / "none").string(), 0.1, 0}, 0),
               DataError);
}

TEST(DataConfig, DefaultCorpusWhenPrepared) {
  const auto path = std::filesystem::path(MESHTRAIN_SOURCE_DIR) / kDefaultTextPath;
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "run scripts/prepare-data.sh for " << path;
  auto data = make_dataset(DataConfig{DataKind::Text, path.string(), 0.1, 0}, 64);
  const int64_t total = data->num_samples(Split::Train) + data->num_samples(Split::Validation);
  EXPECT_GT(total * 64, 4'000'000);  // about 4.4 MB of text
  Batch batch;
  const std::vector<int64_t> first = {0};
  data->fill_batch(Split::Train, first, batch);
  std::string start;
  for (int64_t t = 0; t < 14; ++t) start.push_back(static_cast<char>(batch.tokens[t]));
  EXPECT_EQ(start, "Ge1:1 In the b");
}

}  // namespace
}  // namespace meshtrain
