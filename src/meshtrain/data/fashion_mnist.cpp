#include "meshtrain/data/fashion_mnist.hpp"

#include <string>

#include "meshtrain/core/error.hpp"
#include "meshtrain/core/shape.hpp"
#include "meshtrain/data/idx.hpp"

namespace meshtrain {

namespace fs = std::filesystem;

namespace {

// Debian ships name.gz; a hand-made directory may hold the unpacked file.
fs::path find_file(const fs::path& dir, const std::string& name) {
  const fs::path gz = dir / (name + ".gz");
  if (fs::exists(gz)) return gz;
  const fs::path plain = dir / name;
  if (fs::exists(plain)) return plain;
  throw DataError("Fashion-MNIST: neither " + gz.string() + " nor " + plain.string() +
                  " exists (install Debian's dataset-fashion-mnist with scripts/install-deps.sh,"
                  " or point the data path at a directory holding the IDX files)");
}

void load_part(const fs::path& dir, const std::string& prefix, std::vector<uint8_t>& pixels,
                      std::vector<uint8_t>& labels) {
  constexpr int64_t side = FashionMnistDataset::kImageSide;
  const fs::path image_path = find_file(dir, prefix + "-images-idx3-ubyte");
  const fs::path label_path = find_file(dir, prefix + "-labels-idx1-ubyte");
  IdxArray images = read_idx(image_path);
  IdxArray label_array = read_idx(label_path);

  if (images.dims.size() != 3 || images.dims[1] != side || images.dims[2] != side)
    throw DataError("Fashion-MNIST: " + image_path.string() + " holds images of dims " +
                    shape_string(images.dims) + ", expected (N, 28, 28)");
  if (label_array.dims.size() != 1 || label_array.dims[0] != images.dims[0])
    throw DataError("Fashion-MNIST: " + label_path.string() + " holds labels of dims " +
                    shape_string(label_array.dims) + ", expected (" +
                    std::to_string(images.dims[0]) + ") to match " + image_path.string());
  for (size_t i = 0; i < label_array.data.size(); ++i)
    if (label_array.data[i] >= FashionMnistDataset::kClasses)
      throw DataError("Fashion-MNIST: " + label_path.string() + " has label " +
                      std::to_string(label_array.data[i]) + " at index " + std::to_string(i) +
                      "; classes are 0..9");
  pixels = std::move(images.data);
  labels = std::move(label_array.data);
}

}  // namespace

FashionMnistDataset::FashionMnistDataset(const fs::path& dir) {
  if (!fs::is_directory(dir))
    throw DataError("Fashion-MNIST: directory " + dir.string() +
                    " does not exist (install Debian's dataset-fashion-mnist with"
                    " scripts/install-deps.sh)");
  load_part(dir, "train", train_.pixels, train_.labels);
  load_part(dir, "t10k", val_.pixels, val_.labels);
}

int64_t FashionMnistDataset::num_samples(Split split) const {
  return static_cast<int64_t>(part(split).labels.size());
}

uint8_t FashionMnistDataset::label(Split split, int64_t i) const { return part(split).labels.at(i); }

void FashionMnistDataset::fill_batch(Split split, std::span<const int64_t> indices,
                                     Batch& batch) const {
  constexpr int64_t HW = kImageSide * kImageSide;
  const Part& p = part(split);
  const int64_t count = num_samples(split);
  const int64_t B = static_cast<int64_t>(indices.size());

  batch.batch_size = B;
  batch.seq_len = 0;
  batch.image_h = batch.image_w = kImageSide;
  batch.pixels.ensure(static_cast<size_t>(B * HW));  // (B, H*W)
  batch.targets.ensure(static_cast<size_t>(B));      // (B)
  batch.tokens.ensure(0);  // keeps its capacity; says "no tokens here"

  for (int64_t b = 0; b < B; ++b) {
    const int64_t i = indices[b];
    if (i < 0 || i >= count)
      throw Error("Fashion-MNIST: sample " + std::to_string(i) + " is outside the " +
                  std::string(split_name(split)) + " split's " + std::to_string(count) +
                  " samples");
    const uint8_t* src = p.pixels.data() + i * HW;
    float* dst = batch.pixels.data() + b * HW;
    for (int64_t k = 0; k < HW; ++k) dst[k] = static_cast<float>(src[k]) / 255.0f;
    batch.targets[b] = p.labels[i];
  }
}

}  // namespace meshtrain
