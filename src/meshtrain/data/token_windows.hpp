#pragma once
// Windows over a stream of token ids, shared by the byte text and the token
// file data sets.
//
// Terms: a split is len consecutive tokens. Sample i is window i: the T+1
// tokens [i*T, i*T + T]; its inputs are the first T, its targets the same
// window shifted by one. Windows start every T tokens (stride T), so their
// inputs do not overlap and the last target of window i is the first input
// of window i+1. A split of len tokens holds (len - 1) / T windows; the tail
// that does not fill a window is never seen.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "meshtrain/core/batch.hpp"
#include "meshtrain/core/error.hpp"
#include "meshtrain/data/dataset.hpp"

namespace meshtrain {

// Windows of T+1 tokens at stride T in a split of len tokens.
inline int64_t windows_in(int64_t len, int64_t seq_len) { return len > seq_len ? (len - 1) / seq_len : 0; }

// Fills batch with windows indices[0..B) of split: tokens and targets (B, T),
// pixels emptied; nothing allocates once the buffers have grown. An index
// outside the split's windows throws Error naming the data (`data_name`, such
// as "text data") and the split.
template <class Token>
void fill_windows(std::span<const Token> tokens, int64_t seq_len, std::span<const int64_t> indices, Batch& batch,
                  std::string_view data_name, Split split) {
  const int64_t B = static_cast<int64_t>(indices.size());
  const int64_t T = seq_len;
  const int64_t count = windows_in(static_cast<int64_t>(tokens.size()), T);
  batch.batch_size = B;
  batch.seq_len = T;
  batch.image_h = batch.image_w = 0;
  batch.tokens.ensure(static_cast<size_t>(B * T));   // (B, T)
  batch.targets.ensure(static_cast<size_t>(B * T));  // (B, T)
  batch.pixels.ensure(0);  // keeps its capacity; says "no images here"
  for (int64_t b = 0; b < B; ++b) {
    const int64_t i = indices[b];
    if (i < 0 || i >= count)
      throw Error(std::string(data_name) + ": sample " + std::to_string(i) + " is outside the " +
                  std::string(split_name(split)) + " split's " + std::to_string(count) + " samples");
    const Token* window = tokens.data() + i * T;  // T+1 tokens: window[0..T]
    int32_t* inp = batch.tokens.data() + b * T;
    int32_t* tgt = batch.targets.data() + b * T;
    for (int64_t t = 0; t < T; ++t) {
      inp[t] = static_cast<int32_t>(window[t]);
      tgt[t] = static_cast<int32_t>(window[t + 1]);
    }
  }
}

}  // namespace meshtrain
