#include "meshtrain/parallel/data_parallel/gradient_buckets.hpp"

#include <algorithm>

namespace meshtrain::parallel {

std::vector<GradientBucket> plan_gradient_buckets(const ParamStore& store, size_t bucket_bytes,
                                                  size_t first_bucket_bytes) {
  const auto& views = store.views();
  std::vector<GradientBucket> buckets;
  // Where tensor i's range ends: the next tensor's offset, so the padding
  // after a tensor travels with it and the buckets tile the whole buffer.
  auto range_end = [&](size_t i) { return i + 1 < views.size() ? views[i + 1].offset : store.flat_size(); };
  auto bytes_of = [&](size_t i) { return (range_end(i) - views[i].offset) * sizeof(float); };
  // The first tensors are ready last (the embeddings, at the very end of
  // backward): they form the last bucket on their own, small, so what is
  // left to send once backward returns is small too.
  size_t tail_end = 0, tail_bytes = 0;
  while (tail_end < views.size() && tail_bytes < first_bucket_bytes && views[tail_end].expert == views[0].expert)
    tail_bytes += bytes_of(tail_end++);
  if (tail_end == views.size()) tail_end = 0;  // a small model: one bucket
  size_t end_view = views.size();
  while (end_view > tail_end) {
    const size_t limit = buckets.empty() ? first_bucket_bytes : bucket_bytes;
    size_t first = end_view - 1, bytes = bytes_of(first);
    const bool expert = views[first].expert;
    while (first > tail_end && bytes < limit && views[first - 1].expert == expert) bytes += bytes_of(--first);
    buckets.push_back({first == 0 ? 0 : views[first].offset, range_end(end_view - 1), first, end_view, expert});
    end_view = first;
  }
  // The first tensor's range starts at 0 whatever its offset, so the
  // buckets cover [0, flat_size) exactly.
  if (tail_end > 0) buckets.push_back({0, range_end(tail_end - 1), 0, tail_end, views[0].expert});
  return buckets;
}

}  // namespace meshtrain::parallel
