#include "meshtrain/optim/view_sums.hpp"

namespace meshtrain {

ViewSums::ViewSums(const ParamStore& store) : sums_(2 * store.views().size()) {
  for (size_t v = 0; v < store.views().size(); ++v) decays_.push_back(store.view(v).weight_decay);
}

std::span<double> ViewSums::add(const UpdateChunks& chunks, std::span<const double> chunk_sums) {
  for (size_t v = 0; v < views(); ++v) {
    double first = 0, second = 0;
    if (decays_[v])
      for (size_t c = chunks.first[v]; c < chunks.first[v + 1]; ++c) {
        first += chunk_sums[2 * c];
        second += chunk_sums[2 * c + 1];
      }
    sums_[2 * v] = first;
    sums_[2 * v + 1] = second;
  }
  return sums_;
}

}  // namespace meshtrain
