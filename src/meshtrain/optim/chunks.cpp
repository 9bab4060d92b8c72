#include "meshtrain/optim/chunks.hpp"

#include <algorithm>
#include <string>

#include "meshtrain/core/error.hpp"

namespace meshtrain {

UpdateChunks::UpdateChunks(const ParamStore& store) : flat_size(store.flat_size()) {
  const auto& views = store.views();
  first.reserve(views.size() + 1);
  for (size_t v = 0; v < views.size(); ++v) {
    first.push_back(chunks.size());
    const ParamView& view = views[v];
    for (size_t off = 0; off < view.numel; off += kUpdateChunkElems) {
      size_t n = std::min(kUpdateChunkElems, view.numel - off);
      chunks.push_back({view.offset + off, view.offset + off + n, v, view.weight_decay});
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

double sum_squares(const float* x, size_t n) {
  // Eight independent accumulators let the compiler vectorize without
  // -ffast-math while keeping the association fixed.
  constexpr size_t kLanes = 8;
  double lane[kLanes] = {};
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (size_t j = 0; j < kLanes; ++j) lane[j] += double(x[i + j]) * double(x[i + j]);
  for (size_t j = 0; i < n; ++i, ++j) lane[j] += double(x[i]) * double(x[i]);
  double s = 0;
  for (size_t j = 0; j < kLanes; ++j) s += lane[j];
  return s;
}

}  // namespace meshtrain
