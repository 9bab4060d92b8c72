#pragma once
// LARS's and LAMB's per-view norms from the backend's per-chunk sums of
// squares (two per chunk: the parameters', then the gradients' or the
// directions'). Each view adds its chunks' sums in chunk order, so its norm
// depends on neither the thread count nor the device; views without weight
// decay stay 0 (they are not adapted).
#include <cstddef>
#include <span>
#include <vector>

#include "meshtrain/core/param_store.hpp"
#include "meshtrain/optim/chunks.hpp"

namespace meshtrain {

class ViewSums {
 public:
  explicit ViewSums(const ParamStore& store);
  // Per view v, [2v] and [2v + 1]: its chunks' first and second sums
  // (chunk_sums holds two per chunk of `chunks`). The span stays valid
  // until the next call; the caller sums it over the ranks in place where
  // views are sharded.
  std::span<double> add(const UpdateChunks& chunks, std::span<const double> chunk_sums);
  size_t views() const { return decays_.size(); }
  bool decays(size_t view) const { return decays_[view] != 0; }

 private:
  std::vector<char> decays_;  // (views) the view's weight_decay flag
  std::vector<double> sums_;  // (2 views)
};

}  // namespace meshtrain
