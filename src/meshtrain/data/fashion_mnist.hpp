#pragma once
// Fashion-MNIST: 28x28 grey images of clothing in 10 classes. The train split
// is the 60,000-image training file, the validation split the 10,000-image
// t10k file. Debian's dataset-fashion-mnist installs the four gzipped IDX
// files in kFashionMnistDefaultDir; another directory may hold them gzipped
// (name.gz) or plain (name).
#include <cstdint>
#include <filesystem>
#include <vector>

#include "meshtrain/data/dataset.hpp"

namespace meshtrain {

inline constexpr const char* kFashionMnistDefaultDir = "/usr/share/datasets/fashion-mnist";

class FashionMnistDataset final : public Dataset {
 public:
  static constexpr int64_t kImageSide = 28;
  static constexpr int64_t kClasses = 10;

  // Reads all four files once (about 55 MB as bytes). DataError naming the
  // file for a missing or malformed one, images that are not (N, 28, 28),
  // a label count that differs from the image count, or a label >= 10.
  explicit FashionMnistDataset(const std::filesystem::path& dir = kFashionMnistDefaultDir);

  DataKind kind() const override { return DataKind::FashionMnist; }
  int64_t num_samples(Split split) const override;
  int64_t num_classes() const override { return kClasses; }
  int64_t seq_len() const override { return 0; }
  int64_t image_h() const override { return kImageSide; }
  int64_t image_w() const override { return kImageSide; }
  void fill_batch(Split split, std::span<const int64_t> indices, Batch& batch) const override;

  // Raw label of sample i, for tests and class statistics.
  uint8_t label(Split split, int64_t i) const;

 private:
  struct Part {
    std::vector<uint8_t> pixels;  // (N, 28*28), 0..255
    std::vector<uint8_t> labels;  // (N)
  };
  const Part& part(Split split) const { return split == Split::Train ? train_ : val_; }

  Part train_, val_;
};

}  // namespace meshtrain
