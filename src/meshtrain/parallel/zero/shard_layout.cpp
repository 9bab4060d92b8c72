#include "meshtrain/parallel/zero/shard_layout.hpp"

#include <algorithm>
#include <string>

#include "meshtrain/core/error.hpp"

namespace meshtrain::parallel {

ShardLayout::ShardLayout(const ParamStore& store, int rank, int world) : rank_(rank), world_(world) {
  if (world < 1 || rank < 0 || rank >= world)
    throw Error("ShardLayout: rank " + std::to_string(rank) + " is outside a world of " + std::to_string(world));
  constexpr size_t align = ParamStore::kAlignElems;
  const size_t n = size_t(world), r = size_t(rank);
  const auto& units = store.units();
  size_t blocks = 0, whole = 0;
  for (size_t u = 0; u < units.size(); ++u) {
    const ParamUnit& pu = units[u];
    UnitShard s;
    s.unit = u;
    s.begin = pu.begin;
    s.end = pu.end;
    s.whole_step = pu.whole_step;
    const size_t per_rank = (pu.size() + n - 1) / n;
    s.slice = (per_rank + align - 1) / align * align;
    s.local = local_size_;
    const size_t lo = std::min(pu.end, pu.begin + r * s.slice);
    const size_t hi = std::min(pu.end, lo + s.slice);
    s.owned = {.begin = lo, .end = hi, .local = s.local};
    if (hi > lo) segments_.push_back(s.owned);
    local_size_ += s.slice;
    if (s.whole_step) {
      s.whole_step_offset = whole;
      whole += gathered_size(s);
    } else {
      s.block_ordinal = blocks++;
    }
    units_.push_back(s);
  }
}

size_t ShardLayout::max_gathered_size(bool whole_step) const {
  size_t most = 0;
  for (const auto& u : units_)
    if (u.whole_step == whole_step) most = std::max(most, gathered_size(u));
  return most;
}

size_t ShardLayout::whole_step_gathered_size() const {
  size_t total = 0;
  for (const auto& u : units_)
    if (u.whole_step) total += gathered_size(u);
  return total;
}

}  // namespace meshtrain::parallel
