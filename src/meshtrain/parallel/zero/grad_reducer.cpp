#include "meshtrain/parallel/zero/grad_reducer.hpp"


#include "meshtrain/nn/backend.hpp"
#include "meshtrain/parallel/device_collectives.hpp"

namespace meshtrain::parallel {

GradReducer::GradReducer(ParamStore& store, const ShardLayout& layout, comm::ProcessGroup& group,
                         comm::OverlapLedger& ledger, Precision wire)
    : store_(store),
      layout_(layout),
      memory_(nn::memory_of(store)),
      backend_(nn::backend_of(store)),
      collectives_(device_collectives_for(group, store)),
      shard_(memory_, MemoryKind::Gradients),
      incoming_(memory_, MemoryKind::Gradients),
      whole_step_(memory_, MemoryKind::Communication),
      whole_step16_(memory_, MemoryKind::Communication),
      bf16_(wire == Precision::Bf16),
      slots_{Slot(memory_), Slot(memory_)},
      ledger_(ledger) {
  for (auto& s : slots_) {
    s.data.ensure(layout.max_gathered_size(false));
    if (bf16_) s.data16.ensure(layout.max_gathered_size(false));
  }
  whole_step_.ensure(layout.whole_step_gathered_size());
  if (bf16_) whole_step16_.ensure(layout.whole_step_gathered_size());
  shard_.resize(layout.local_size());
  store.release_flat_grads();
}

GradReducer::Pending GradReducer::reduce_scatter(const UnitShard& u, float* staged, Bf16* staged16) {
  const size_t gathered = layout_.gathered_size(u);
  if (!bf16_)
    return {collectives_->reduce_scatter_async(comm::Buffer(std::span(staged, gathered)),
                                               comm::Buffer(std::span(target(u), u.slice)), comm::ReduceKind::Avg),
            &u, nullptr};
  backend_.to_bf16(staged, staged16, gathered);
  Bf16* mine = staged16 + size_t(layout_.rank()) * u.slice;  // the rank's segment, reduced in place
  return {collectives_->reduce_scatter_async(comm::Buffer(std::span(staged16, gathered)),
                                             comm::Buffer(std::span(mine, u.slice)), comm::ReduceKind::Sum),
          &u, mine};
}

void GradReducer::complete(Pending& pending) {
  if (!pending.work) return;
  pending.work->wait();
  ledger_.waited(std::move(pending.work));
  if (!pending.segment) return;
  // As Avg divides.
  backend_.widen_divided(pending.segment, target(*pending.unit), pending.unit->slice,
                         static_cast<float>(collectives_->size()));
}

void GradReducer::start_backward(bool accumulate) {
  accumulate_ = accumulate;
  if (accumulate_) incoming_.ensure(layout_.local_size());
  // Zeroed whole: backward adds into it, and the padding past each unit's
  // end must reduce to zeros in the shard.
  zero(whole_step_.raw(), whole_step_.size());
  for (const auto& u : layout_.units())
    if (u.whole_step) store_.bind_unit_grads(u.unit, whole_step_.raw() + u.whole_step_offset, /*zeroed=*/true);
}

void GradReducer::acquire(size_t unit) {
  Slot& slot = slot_of(unit);
  if (slot.pending.work) {  // the compute needs the buffer back: a wait of its own
    ledger_.begin_waits(*collectives_);
    complete(slot.pending);
  }
  zero(slot.data.raw(), layout_.gathered_size(layout_.unit(unit)));
  store_.bind_unit_grads(unit, slot.data.raw(), /*zeroed=*/true);
}

void GradReducer::reduce(size_t unit) {
  Slot& slot = slot_of(unit);
  slot.pending = reduce_scatter(layout_.unit(unit), slot.data.raw(), slot.data16.raw());
  store_.bind_unit_grads(unit, nullptr);
}

void GradReducer::finish_backward() {
  std::vector<Pending> whole_step;
  for (const auto& u : layout_.units())
    if (u.whole_step)
      whole_step.push_back(reduce_scatter(u, whole_step_.raw() + u.whole_step_offset,
                                          bf16_ ? whole_step16_.raw() + u.whole_step_offset : nullptr));
  ledger_.begin_waits(*collectives_);  // the rest, waited for one after another
  for (auto& s : slots_) complete(s.pending);
  for (auto& p : whole_step) complete(p);
  for (const auto& u : layout_.units())
    if (u.whole_step) store_.bind_unit_grads(u.unit, nullptr);
  // Every unit's slice of incoming_ was written (padding reduces to zeros).
  if (accumulate_) backend_.residual_forward(shard_.raw(), shard_.raw(), incoming_.raw(), int64_t(shard_.size()));
}

}  // namespace meshtrain::parallel
