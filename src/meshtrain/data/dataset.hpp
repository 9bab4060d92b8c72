#pragma once
// What the trainer sees of a data set: two splits, a sample count for each, and
// a way to fill a Batch from a list of sample indices. Sampling order lives in
// the sampler, not here, so every kind of data shares one resumable,
// rank-aware order (data/sampler.hpp).
#include <cstdint>
#include <span>
#include <string_view>

#include "meshtrain/core/batch.hpp"
#include "meshtrain/core/enum_names.hpp"

namespace meshtrain {

enum class Split { Train, Validation };

// Bytes of any file as tokens, token ids from .bin files (nanoGPT's, llm.c's;
// data/tokens/), or Fashion-MNIST's images and labels.
enum class DataKind { Text, Tokens, FashionMnist };
inline constexpr EnumName<DataKind> kDataKindNames[] = {
    {DataKind::Text, "text"}, {DataKind::Tokens, "tokens"}, {DataKind::FashionMnist, "fashion_mnist"}};
constexpr std::span<const EnumName<DataKind>> enum_names(DataKind) { return kDataKindNames; }

std::string_view split_name(Split split);

class Dataset {
 public:
  virtual ~Dataset() = default;

  virtual DataKind kind() const = 0;
  virtual int64_t num_samples(Split split) const = 0;
  // Output classes of the model: the vocabulary (256 for bytes, model.vocab_size
  // for token files), 10 for Fashion-MNIST.
  virtual int64_t num_classes() const = 0;
  // T for token data sets, 0 for images.
  virtual int64_t seq_len() const = 0;
  // H and W for image data sets, 0 for tokens.
  virtual int64_t image_h() const = 0;
  virtual int64_t image_w() const = 0;

  // Fills batch with samples indices[0..B) of the split, B = indices.size().
  // Buffers only grow, so after the first call of a given B nothing allocates.
  // Token data: tokens and targets (B, T); pixels emptied.
  // Images: pixels (B, H*W) in [0, 1], targets (B) labels; tokens emptied.
  // An index outside [0, num_samples(split)) throws Error.
  virtual void fill_batch(Split split, std::span<const int64_t> indices, Batch& batch) const = 0;
};

}  // namespace meshtrain
