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
  size_t end_view = views.size();
  while (end_view > 0) {
    const size_t limit = buckets.empty() ? first_bucket_bytes : bucket_bytes;
    size_t first = end_view - 1, bytes = (range_end(first) - views[first].offset) * sizeof(float);
    while (first > 0 && bytes < limit) {
      --first;
      bytes += (range_end(first) - views[first].offset) * sizeof(float);
    }
    // The first tensor's range starts at 0 whatever its offset, so the
    // buckets cover [0, flat_size) exactly.
    const size_t begin = first == 0 ? 0 : views[first].offset;
    buckets.push_back({begin, range_end(end_view - 1), first, end_view});
    end_view = first;
  }
  return buckets;
}

}  // namespace meshtrain::parallel
