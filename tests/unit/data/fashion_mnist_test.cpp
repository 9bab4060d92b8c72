#include "meshtrain/data/fashion_mnist.hpp"

#include <gtest/gtest.h>

#include <array>

#include "meshtrain/core/error.hpp"
#include "test_files.hpp"

namespace meshtrain {
namespace {

using testing::idx_bytes;
using testing::TempDir;
using testing::write_bytes;
using testing::write_gz;

// A tiny Fashion-MNIST directory: n train and m test images whose pixels are
// all equal to their label * 25.
void write_fake(const TempDir& dir, uint32_t n, uint32_t m, bool gz) {
  for (auto [prefix, count] : {std::pair{"train", n}, std::pair{"t10k", m}}) {
    std::vector<uint8_t> images, labels;
    for (uint32_t i = 0; i < count; ++i) {
      const auto label = static_cast<uint8_t>(i % 10);
      labels.push_back(label);
      images.insert(images.end(), 28 * 28, static_cast<uint8_t>(label * 25));
    }
    const std::string base = std::string(prefix);
    if (gz) {
      write_gz(dir / (base + "-images-idx3-ubyte.gz"), idx_bytes({count, 28, 28}, images));
      write_gz(dir / (base + "-labels-idx1-ubyte.gz"), idx_bytes({count}, labels));
    } else {
      write_bytes(dir / (base + "-images-idx3-ubyte"), idx_bytes({count, 28, 28}, images));
      write_bytes(dir / (base + "-labels-idx1-ubyte"), idx_bytes({count}, labels));
    }
  }
}

TEST(FashionMnist, ReadsADirectoryGzippedOrPlain) {
  for (bool gz : {true, false}) {
    TempDir dir;
    write_fake(dir, 12, 7, gz);
    FashionMnistDataset data(dir.path());
    EXPECT_EQ(data.num_samples(Split::Train), 12);
    EXPECT_EQ(data.num_samples(Split::Validation), 7);

    Batch batch;
    const std::vector<int64_t> idx = {3, 0, 11};
    data.fill_batch(Split::Train, idx, batch);
    EXPECT_EQ(batch.batch_size, 3);
    EXPECT_EQ(batch.image_h, 28);
    EXPECT_EQ(batch.image_w, 28);
    ASSERT_EQ(batch.pixels.size(), 3u * 28 * 28);
    ASSERT_EQ(batch.targets.size(), 3u);
    EXPECT_EQ(batch.tokens.size(), 0u);
    for (size_t b = 0; b < idx.size(); ++b) {
      const int32_t label = static_cast<int32_t>(idx[b] % 10);
      EXPECT_EQ(batch.targets[b], label);
      EXPECT_FLOAT_EQ(batch.pixels[b * 784 + 100], label * 25 / 255.0f);
    }
  }
}

TEST(FashionMnist, RejectsMismatchedCountsAndBadLabels) {
  TempDir dir;
  write_fake(dir, 5, 5, true);
  write_gz(dir / "t10k-labels-idx1-ubyte.gz", idx_bytes({4}, {0, 1, 2, 3}));
  EXPECT_THROW(FashionMnistDataset{dir.path()}, DataError);
  write_gz(dir / "t10k-labels-idx1-ubyte.gz", idx_bytes({5}, {0, 1, 2, 3, 10}));
  EXPECT_THROW(FashionMnistDataset{dir.path()}, DataError);
  write_gz(dir / "t10k-images-idx3-ubyte.gz", idx_bytes({5, 784}, std::vector<uint8_t>(5 * 784)));
  EXPECT_THROW(FashionMnistDataset{dir.path()}, DataError);
}

TEST(FashionMnist, MissingDirectoryOrFile) {
  TempDir dir;
  EXPECT_THROW(FashionMnistDataset{dir / "nowhere"}, DataError);
  write_fake(dir, 2, 2, true);
  std::filesystem::remove(dir / "train-labels-idx1-ubyte.gz");
  try {
    FashionMnistDataset data(dir.path());
    FAIL() << "no DataError";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("train-labels-idx1-ubyte"), std::string::npos) << e.what();
  }
}

// The real files from Debian's dataset-fashion-mnist, when installed.
TEST(FashionMnist, DebianPackage) {
  if (!std::filesystem::exists(std::filesystem::path(kFashionMnistDefaultDir) /
                               "train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  FashionMnistDataset data;
  ASSERT_EQ(data.num_samples(Split::Train), 60000);
  ASSERT_EQ(data.num_samples(Split::Validation), 10000);
  EXPECT_EQ(data.num_classes(), 10);

  // Fashion-MNIST is balanced: 6000 and 1000 of each class.
  for (Split split : {Split::Train, Split::Validation}) {
    std::array<int64_t, 10> counts{};
    for (int64_t i = 0; i < data.num_samples(split); ++i) {
      const uint8_t label = data.label(split, i);
      ASSERT_LT(label, 10);
      ++counts[label];
    }
    for (int64_t c : counts) EXPECT_EQ(c, split == Split::Train ? 6000 : 1000);
  }

  Batch batch;
  const std::vector<int64_t> idx = {0, 59999};
  data.fill_batch(Split::Train, idx, batch);
  float lo = 1, hi = 0;
  for (float p : batch.pixels.span()) lo = std::min(lo, p), hi = std::max(hi, p);
  EXPECT_GE(lo, 0.0f);
  EXPECT_LE(hi, 1.0f);
  EXPECT_GT(hi, 0.5f);  // real images, not blank ones
}

}  // namespace
}  // namespace meshtrain
