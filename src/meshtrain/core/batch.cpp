#include "meshtrain/core/batch.hpp"

#include <algorithm>

namespace meshtrain {

void copy_samples(const Batch& full, int64_t first, int64_t count, Batch& out) {
  out.batch_size = count;
  out.seq_len = full.seq_len;
  out.image_h = full.image_h;
  out.image_w = full.image_w;
  // Each buffer holds B rows of equal length (tokens and targets (B, T) or
  // targets (B); pixels (B, H*W)); an empty one stays empty.
  const auto rows = [&](const auto& from, auto& to) {
    const size_t row = full.batch_size > 0 ? from.size() / static_cast<size_t>(full.batch_size) : 0;
    const size_t n = row * static_cast<size_t>(count);
    to.ensure(n);
    if (n) std::copy_n(from.data() + row * static_cast<size_t>(first), n, to.data());
  };
  rows(full.tokens, out.tokens);
  rows(full.targets, out.targets);
  rows(full.pixels, out.pixels);
}

}  // namespace meshtrain
