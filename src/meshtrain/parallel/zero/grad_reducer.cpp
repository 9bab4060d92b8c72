#include "meshtrain/parallel/zero/grad_reducer.hpp"

#include <chrono>

#include "meshtrain/kernels/bf16.hpp"

namespace meshtrain::parallel {

GradReducer::GradReducer(ParamStore& store, const ShardLayout& layout, comm::ProcessGroup& group, Precision wire)
    : store_(store), layout_(layout), group_(group), device_(store.device_memory()), bf16_(wire == Precision::Bf16) {
  for (auto& s : slots_) {
    s.data.ensure(device_, layout.max_gathered_size(false));
    if (bf16_) s.data16.ensure(layout.max_gathered_size(false));
  }
  whole_step_.ensure(device_, layout.whole_step_gathered_size());
  if (bf16_) whole_step16_.ensure(layout.whole_step_gathered_size());
  shard_.resize(device_, layout.local_size());
  store.release_flat_grads();
}

GradReducer::Pending GradReducer::reduce_scatter(const UnitShard& u, float* staged, Bf16* staged16) {
  const size_t gathered = layout_.gathered_size(u);
  if (!bf16_)
    return {group_.reduce_scatter_in_place_async(std::span<float>(staged, gathered),
                                                 std::span<float>(target(u), u.slice), comm::ReduceKind::Avg),
            &u, nullptr};
  kernels::to_bf16(staged, staged16, gathered);
  Bf16* mine = staged16 + size_t(layout_.rank()) * u.slice;  // the rank's segment, reduced in place
  return {group_.reduce_scatter_in_place_async(std::span<Bf16>(staged16, gathered), std::span<Bf16>(mine, u.slice),
                                               comm::ReduceKind::Sum),
          &u, mine};
}

void GradReducer::complete(Pending& pending) {
  if (!pending.work) return;
  auto work = std::move(pending.work);
  pending.work = nullptr;
  work->wait();
  if (!pending.segment) return;
  float* into = target(*pending.unit);
  const float ranks = static_cast<float>(group_.size());
  for (size_t i = 0; i < pending.unit->slice; ++i) into[i] = to_float(pending.segment[i]) / ranks;  // as Avg divides
}

void GradReducer::start_backward(bool accumulate) {
  accumulate_ = accumulate;
  if (accumulate_) incoming_.ensure(layout_.local_size());
  // Zeroed whole: backward adds into it, and the padding past each unit's
  // end must reduce to zeros in the shard.
  whole_step_.zero_kernel(0, whole_step_.size());
  for (const auto& u : layout_.units())
    if (u.whole_step) store_.bind_unit_grads(u.unit, whole_step_.kernel() + u.whole_step_offset, /*zeroed=*/true);
}

void GradReducer::acquire(size_t unit) {
  Slot& slot = slot_of(unit);
  complete(slot.pending);
  slot.data.zero_kernel(0, layout_.gathered_size(layout_.unit(unit)));
  store_.bind_unit_grads(unit, slot.data.kernel(), /*zeroed=*/true);
}

void GradReducer::reduce(size_t unit) {
  Slot& slot = slot_of(unit);
  const UnitShard& u = layout_.unit(unit);
  slot.data.download(0, layout_.gathered_size(u));
  slot.pending = reduce_scatter(u, slot.data.host(), slot.data16.data());
  store_.bind_unit_grads(unit, nullptr);
}

double GradReducer::finish_backward() {
  whole_step_.download(0, whole_step_.size());
  std::vector<Pending> whole_step;
  for (const auto& u : layout_.units())
    if (u.whole_step)
      whole_step.push_back(reduce_scatter(u, whole_step_.host() + u.whole_step_offset,
                                          bf16_ ? whole_step16_.data() + u.whole_step_offset : nullptr));
  const auto t0 = std::chrono::steady_clock::now();
  for (auto& s : slots_) complete(s.pending);
  for (auto& p : whole_step) complete(p);
  for (const auto& u : layout_.units())
    if (u.whole_step) store_.bind_unit_grads(u.unit, nullptr);
  if (accumulate_) {
    // Every unit's slice of incoming_ was written (padding reduces to zeros).
    float* shard = shard_.host();
    const float* in = incoming_.data();
    for (size_t i = 0; i < layout_.local_size(); ++i) shard[i] += in[i];
  }
  shard_.upload(0, shard_.size());
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace meshtrain::parallel
