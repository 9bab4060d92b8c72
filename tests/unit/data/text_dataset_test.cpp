#include "meshtrain/data/text_dataset.hpp"

#include <gtest/gtest.h>

#include "meshtrain/core/error.hpp"
#include "test_files.hpp"

namespace meshtrain {
namespace {

using testing::TempDir;
using testing::write_text;

// 'a'.. cycling, so byte k of the file is predictable from k.
std::string pattern(size_t n) {
  std::string s(n, ' ');
  for (size_t k = 0; k < n; ++k) s[k] = static_cast<char>('a' + k % 26);
  return s;
}

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const DataError& e) {
    return e.what();
  }
  return "(no DataError thrown)";
}

TEST(TextDataset, SplitsTheLastFractionOffForValidation) {
  TempDir dir;
  write_text(dir / "t.txt", pattern(100));
  TextDataset data(dir / "t.txt", 4, 0.2);
  EXPECT_EQ(data.split_bytes(Split::Train), 80);
  EXPECT_EQ(data.split_bytes(Split::Validation), 20);
  // A split of len bytes holds (len - 1) / T windows of T+1 bytes at stride T.
  EXPECT_EQ(data.num_samples(Split::Train), (80 - 1) / 4);
  EXPECT_EQ(data.num_samples(Split::Validation), (20 - 1) / 4);
  EXPECT_EQ(data.num_classes(), 256);
  EXPECT_EQ(data.seq_len(), 4);
  EXPECT_EQ(data.kind(), DataKind::Text);
}

TEST(TextDataset, WindowsAreInputsAndTargetsShiftedByOne) {
  TempDir dir;
  const std::string text = pattern(100);
  write_text(dir / "t.txt", text);
  const int64_t T = 4;
  TextDataset data(dir / "t.txt", T, 0.2);

  Batch batch;
  const std::vector<int64_t> train_idx = {0, 3, 18};  // 18 is the last train window
  data.fill_batch(Split::Train, train_idx, batch);
  EXPECT_EQ(batch.batch_size, 3);
  EXPECT_EQ(batch.seq_len, T);
  ASSERT_EQ(batch.tokens.size(), 3u * T);
  ASSERT_EQ(batch.targets.size(), 3u * T);
  EXPECT_EQ(batch.pixels.size(), 0u);
  for (int64_t b = 0; b < 3; ++b)
    for (int64_t t = 0; t < T; ++t) {
      const size_t k = static_cast<size_t>(train_idx[b] * T + t);  // stride T
      EXPECT_EQ(batch.tokens[b * T + t], static_cast<unsigned char>(text[k]));
      EXPECT_EQ(batch.targets[b * T + t], static_cast<unsigned char>(text[k + 1]));
    }

  // Validation windows start at the split point, byte 80.
  const std::vector<int64_t> val_idx = {1};
  data.fill_batch(Split::Validation, val_idx, batch);
  for (int64_t t = 0; t < T; ++t) {
    EXPECT_EQ(batch.tokens[t], static_cast<unsigned char>(text[80 + T + t]));
    EXPECT_EQ(batch.targets[t], static_cast<unsigned char>(text[80 + T + t + 1]));
  }
  // Windows never reach across the split: the last train target is byte 76 < 80.
  const std::vector<int64_t> past_end = {data.num_samples(Split::Train)};
  EXPECT_THROW(data.fill_batch(Split::Train, past_end, batch), Error);
}

TEST(TextDataset, ReusesBatchBuffers) {
  TempDir dir;
  write_text(dir / "t.txt", pattern(1000));
  TextDataset data(dir / "t.txt", 8, 0.1);
  Batch batch;
  const std::vector<int64_t> idx = {0, 1, 2, 3};
  data.fill_batch(Split::Train, idx, batch);
  const int32_t* tokens = batch.tokens.data();
  const int32_t* targets = batch.targets.data();
  data.fill_batch(Split::Train, idx, batch);
  EXPECT_EQ(batch.tokens.data(), tokens);
  EXPECT_EQ(batch.targets.data(), targets);
}

TEST(TextDataset, MissingFileNamesThePath) {
  TempDir dir;
  const auto path = dir / "absent.txt";
  const std::string message = error_of([&] { TextDataset(path, 4, 0.1); });
  EXPECT_NE(message.find(path.string()), std::string::npos) << message;
  EXPECT_NE(message.find("does not exist"), std::string::npos) << message;
}

TEST(TextDataset, DirectoryIsNotAFile) {
  TempDir dir;
  const std::string message = error_of([&] { TextDataset(dir.path(), 4, 0.1); });
  EXPECT_NE(message.find("directory"), std::string::npos) << message;
}

TEST(TextDataset, UnreadableFileIsADataError) {
  if (::geteuid() == 0) GTEST_SKIP() << "root reads files whatever their mode";
  TempDir dir;
  write_text(dir / "t.txt", pattern(100));
  std::filesystem::permissions(dir / "t.txt", std::filesystem::perms::none);
  const std::string message = error_of([&] { TextDataset(dir / "t.txt", 4, 0.1); });
  EXPECT_NE(message.find("cannot be opened"), std::string::npos) << message;
}

// /proc/self/mem opens fine but reading offset 0 fails (EIO): a read error
// that even root meets.
TEST(TextDataset, ReadErrorIsADataError) {
  if (!std::filesystem::exists("/proc/self/mem")) GTEST_SKIP() << "no /proc";
  const std::string message = error_of([] { TextDataset("/proc/self/mem", 4, 0.1); });
  EXPECT_NE(message.find("cannot be read"), std::string::npos) << message;
}

TEST(TextDataset, FileTooShortForEitherSplit) {
  TempDir dir;
  // Train split 80 bytes is plenty, validation 20 bytes < T+1 = 33.
  write_text(dir / "short_val.txt", pattern(100));
  std::string message = error_of([&] { TextDataset(dir / "short_val.txt", 32, 0.2); });
  EXPECT_NE(message.find("too short"), std::string::npos) << message;
  EXPECT_NE(message.find("validation"), std::string::npos) << message;
  EXPECT_NE(message.find((dir / "short_val.txt").string()), std::string::npos) << message;

  // Train split 5 bytes < T+1 = 9.
  write_text(dir / "short_train.txt", pattern(50));
  message = error_of([&] { TextDataset(dir / "short_train.txt", 8, 0.9); });
  EXPECT_NE(message.find("train split"), std::string::npos) << message;

  write_text(dir / "empty.txt", "");
  EXPECT_THROW(TextDataset(dir / "empty.txt", 1, 0.5), DataError);
}

TEST(TextDataset, ExactlyOneWindowPerSplitIsEnough) {
  TempDir dir;
  write_text(dir / "t.txt", pattern(10));  // 5 + 5 bytes, T+1 = 5
  TextDataset data(dir / "t.txt", 4, 0.5);
  EXPECT_EQ(data.num_samples(Split::Train), 1);
  EXPECT_EQ(data.num_samples(Split::Validation), 1);
}

TEST(TextDataset, RejectsBadNumbers) {
  TempDir dir;
  write_text(dir / "t.txt", pattern(100));
  EXPECT_THROW(TextDataset(dir / "t.txt", 0, 0.1), ConfigError);
  EXPECT_THROW(TextDataset(dir / "t.txt", 4, 0.0), ConfigError);
  EXPECT_THROW(TextDataset(dir / "t.txt", 4, 1.0), ConfigError);
}

}  // namespace
}  // namespace meshtrain
