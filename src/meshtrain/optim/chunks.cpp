#include "meshtrain/optim/chunks.hpp"

#include <algorithm>
#include <string>

#include "meshtrain/core/error.hpp"

namespace meshtrain {

UpdateChunks::UpdateChunks(const ParamStore& store)
    : UpdateChunks(store, FlatSegments{{.begin = 0, .end = store.flat_size(), .local = 0}}) {}

UpdateChunks::UpdateChunks(const ParamStore& store, std::span<const FlatSegment> segments)
    : flat_size(store.flat_size()) {
  const auto& views = store.views();
  for (size_t s = 0; s < segments.size(); ++s) {
    const FlatSegment& seg = segments[s];
    if (seg.begin > seg.end || seg.end > flat_size || (s > 0 && seg.begin < segments[s - 1].end))
      throw Error("UpdateChunks: segments must be sorted, disjoint ranges inside the store's " +
                  std::to_string(flat_size) + " elements");
    local_size = std::max(local_size, seg.local + seg.size());
  }
  first.reserve(views.size() + 1);
  size_t s = 0;  // views and segments both ascend: one merge pass
  for (size_t v = 0; v < views.size(); ++v) {
    first.push_back(chunks.size());
    const ParamView& view = views[v];
    const size_t vbegin = view.offset, vend = view.offset + view.numel;
    while (s < segments.size() && segments[s].end <= vbegin) ++s;
    for (size_t t = s; t < segments.size() && segments[t].begin < vend; ++t) {
      const FlatSegment& seg = segments[t];
      size_t lo = std::max(vbegin, seg.begin);
      const size_t hi = std::min(vend, seg.end);
      while (lo < hi) {
        // Next multiple of kUpdateChunkElems from the view's start.
        const size_t cut = std::min(hi, vbegin + ((lo - vbegin) / kUpdateChunkElems + 1) * kUpdateChunkElems);
        chunks.push_back({.flat = lo, .local = seg.local + (lo - seg.begin), .size = cut - lo, .view = v,
                          .weight_decay = view.weight_decay});
        lo = cut;
      }
    }
  }
  first.push_back(chunks.size());
}

void UpdateChunks::check_layout(const ParamStore& store, const char* who) const {
  if (!store.allocated())
    throw Error(std::string(who) + ": step() on a ParamStore that is not allocated");
  if (store.flat_size() != flat_size || store.views().size() + 1 != first.size())
    throw Error(std::string(who) + ": ParamStore layout changed since the optimizer was built (" +
                std::to_string(store.flat_size()) + " elements, expected " +
                std::to_string(flat_size) + ")");
}

}  // namespace meshtrain
