#include "meshtrain/parallel/zero/block_order.hpp"

#include <utility>

namespace meshtrain::parallel {

void BlockOrder::begin_step() {
  if (!entered_.empty()) followed_ = std::exchange(entered_, {});
  on_record_ = !followed_.empty();
}

std::optional<size_t> BlockOrder::enter(size_t unit) {
  const size_t at = entered_.size();
  entered_.push_back(unit);
  on_record_ = on_record_ && at < followed_.size() && followed_[at] == unit;
  if (!on_record_) return std::nullopt;
  for (size_t next = at + 1; next < followed_.size(); ++next)
    if (followed_[next] != unit) return followed_[next];
  return npos;
}

}  // namespace meshtrain::parallel
