#include "meshtrain/parallel/zero/grad_reducer.hpp"

#include <chrono>
#include <cstring>

namespace meshtrain::parallel {

GradReducer::GradReducer(ParamStore& store, const ShardLayout& layout, comm::ProcessGroup& group)
    : store_(store), layout_(layout), group_(group) {
  for (auto& s : slots_) s.data.ensure(layout.max_gathered_size(false));
  whole_step_.ensure(layout.whole_step_gathered_size());
  shard_.resize(layout.local_size());
  store.release_flat_grads();
}

comm::WorkHandle GradReducer::reduce_scatter(const UnitShard& u, float* staged) {
  float* into = (accumulate_ ? incoming_ : shard_).data() + u.local;
  return group_.reduce_scatter_in_place_async(std::span<float>(staged, layout_.gathered_size(u)),
                                              std::span<float>(into, u.slice), comm::ReduceKind::Avg);
}

void GradReducer::start_backward(bool accumulate) {
  accumulate_ = accumulate;
  if (accumulate_) incoming_.ensure(layout_.local_size());
  // Zeroed whole: backward adds into it, and the padding past each unit's
  // end must reduce to zeros in the shard.
  whole_step_.zero();
  for (const auto& u : layout_.units())
    if (u.whole_step) store_.bind_unit_grads(u.unit, whole_step_.data() + u.whole_step_offset);
}

void GradReducer::acquire(size_t unit) {
  Slot& slot = slot_of(unit);
  if (slot.work) {
    auto work = std::move(slot.work);
    slot.work = nullptr;
    work->wait();
  }
  std::memset(slot.data.data(), 0, layout_.gathered_size(layout_.unit(unit)) * sizeof(float));
  store_.bind_unit_grads(unit, slot.data.data());
}

void GradReducer::reduce(size_t unit) {
  Slot& slot = slot_of(unit);
  slot.work = reduce_scatter(layout_.unit(unit), slot.data.data());
  store_.bind_unit_grads(unit, nullptr);
}

double GradReducer::finish_backward() {
  std::vector<comm::WorkHandle> work;
  for (const auto& u : layout_.units())
    if (u.whole_step) work.push_back(reduce_scatter(u, whole_step_.data() + u.whole_step_offset));
  const auto t0 = std::chrono::steady_clock::now();
  for (auto& s : slots_)
    if (s.work) {
      auto w = std::move(s.work);
      s.work = nullptr;
      w->wait();
    }
  for (auto& w : work) w->wait();
  for (const auto& u : layout_.units())
    if (u.whole_step) store_.bind_unit_grads(u.unit, nullptr);
  if (accumulate_) {
    // Every unit's slice of incoming_ was written (padding reduces to zeros).
    float* shard = shard_.data();
    const float* in = incoming_.data();
    for (size_t i = 0; i < layout_.local_size(); ++i) shard[i] += in[i];
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace meshtrain::parallel
