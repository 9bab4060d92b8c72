#include "meshtrain/parallel/zero/param_gatherer.hpp"

#include <algorithm>
#include <vector>

#include "meshtrain/core/error.hpp"
#include "meshtrain/nn/backend.hpp"
#include "meshtrain/parallel/device_collectives.hpp"

namespace meshtrain::parallel {

ParamGatherer::ParamGatherer(ParamStore& store, const ShardLayout& layout, comm::ProcessGroup& group,
                             comm::OverlapLedger& ledger, bool sharded, Precision wire)
    : store_(store),
      layout_(layout),
      sharded_(sharded),
      memory_(nn::memory_of(store)),
      backend_(nn::backend_of(store)),
      collectives_(device_collectives_for(group, store)),
      shard_(memory_, MemoryKind::Parameters),
      whole_step_(memory_, MemoryKind::Communication),
      whole_step16_(memory_, MemoryKind::Communication),
      bf16_(sharded && wire == Precision::Bf16),
      slots_{Slot(memory_), Slot(memory_)},
      ledger_(ledger) {
  if (!sharded) {
    // Stages 1 and 2 gather every unit through the two slots.
    const size_t most = std::max(layout.max_gathered_size(true), layout.max_gathered_size(false));
    for (auto& s : slots_) s.data.ensure(most);
    return;
  }
  for (auto& s : slots_) {
    s.data.ensure(layout.max_gathered_size(false));
    if (bf16_) s.data16.ensure(layout.max_gathered_size(false));
  }
  whole_step_.ensure(layout.whole_step_gathered_size());
  if (bf16_) whole_step16_.ensure(layout.whole_step_gathered_size());
  shard_.resize(layout.local_size());  // zeroed: the padding past a unit's end stays 0
  const float* flat = store.kernel_params().data();
  for (const auto& u : layout.units())
    if (u.owned.size() > 0) backend_.copy(shard_.raw() + u.local, flat + u.owned.begin, u.owned.size());
  store.release_flat_params();
}

comm::DeviceWorkHandle ParamGatherer::gather(const UnitShard& u, float* out, Bf16* out16) {
  const size_t gathered = layout_.gathered_size(u), at = size_t(layout_.rank()) * u.slice;
  const float* slice = shard_.raw() + u.local;  // as the optimizer left it
  // The slice goes into its place in the gathered unit; the all-gather takes it from there.
  if (!bf16_) {
    backend_.copy(out + at, slice, u.slice);
    return collectives_->all_gather_async(comm::Buffer(std::span(out, gathered)));
  }
  backend_.to_bf16(slice, out16 + at, u.slice);
  return collectives_->all_gather_async(comm::Buffer(std::span(out16, gathered)));
}

void ParamGatherer::finish_gather(const UnitShard& u, float* out, const Bf16* out16) {
  if (bf16_) backend_.widen_divided(out16, out, layout_.gathered_size(u), 1.0f);  // exact: float(x) / 1
}

void ParamGatherer::gather_whole_step() {
  std::vector<comm::DeviceWorkHandle> work;
  for (const auto& u : layout_.units()) {
    if (!u.whole_step) continue;
    work.push_back(gather(u, whole_step_.raw() + u.whole_step_offset,
                          bf16_ ? whole_step16_.raw() + u.whole_step_offset : nullptr));
    store_.bind_unit_params(u.unit, whole_step_.raw() + u.whole_step_offset);
  }
  ledger_.begin_waits(*collectives_);
  for (auto& w : work) {
    w->wait();
    ledger_.waited(std::move(w));
  }
  for (const auto& u : layout_.units())
    if (u.whole_step)
      finish_gather(u, whole_step_.raw() + u.whole_step_offset,
                    bf16_ ? whole_step16_.raw() + u.whole_step_offset : nullptr);
}

void ParamGatherer::release_all() {
  for (auto& s : slots_) {
    wait(s);
    s.unit = npos;
    s.in_use = false;
  }
  for (const auto& u : layout_.units()) store_.bind_unit_params(u.unit, nullptr);
}

void ParamGatherer::start_gather(size_t unit, Slot& slot) {
  wait(slot);  // what it was receiving: a prefetch that was not needed after all
  slot.unit = unit;
  slot.work = gather(layout_.unit(unit), slot.data.raw(), slot.data16.raw());
}

void ParamGatherer::wait(Slot& slot) {
  if (!slot.work) return;
  ledger_.begin_waits(*collectives_);
  slot.work->wait();
  ledger_.waited(std::move(slot.work));
  if (slot.unit != npos) finish_gather(layout_.unit(slot.unit), slot.data.raw(), slot.data16.raw());
}

ParamGatherer::Slot* ParamGatherer::holding(size_t unit) {
  for (auto& s : slots_)
    if (s.unit == unit) return &s;
  return nullptr;
}

ParamGatherer::Slot* ParamGatherer::free_slot(size_t keep) {
  // An empty buffer first, then one not holding `keep`.
  auto cost = [&](const Slot& s) { return s.unit == npos ? 0 : s.unit == keep ? 2 : 1; };
  Slot* found = nullptr;
  for (auto& s : slots_)
    if (!s.in_use && (!found || cost(s) < cost(*found))) found = &s;
  return found;
}

void ParamGatherer::acquire(size_t unit, size_t next) {
  Slot* slot = holding(unit);
  if (!slot) {
    slot = free_slot(next);
    if (!slot)
      throw Error("zero-3: unit " + store_.units()[unit].name + " needs a gather buffer, but units " +
                  store_.units()[slots_[0].unit].name + " and " + store_.units()[slots_[1].unit].name +
                  " still use both");
    start_gather(unit, *slot);
    ++gathers_on_demand_;
  }
  wait(*slot);
  slot->in_use = true;
  store_.bind_unit_params(unit, slot->data.raw());
  if (next != npos && next != unit) prefetch(next);
}

void ParamGatherer::prefetch(size_t unit) {
  if (holding(unit)) return;
  Slot* slot = free_slot(npos);
  if (!slot) return;  // both in use: gathered when needed
  start_gather(unit, *slot);
}

void ParamGatherer::release(size_t unit) {
  if (Slot* slot = holding(unit)) slot->in_use = false;
  store_.bind_unit_params(unit, nullptr);
}

void ParamGatherer::all_gather_flat() {
  float* flat = store_.kernel_params().data();  // the device's, off the CPU
  const int r = layout_.rank();
  // Two slots in turn: while one unit's gather runs, the previous one is
  // copied into the flat buffer.
  std::array<size_t, 2> held{npos, npos};
  auto finish = [&](size_t s) {
    if (held[s] == npos) return;
    wait(slots_[s]);
    const UnitShard& u = layout_.unit(held[s]);
    backend_.copy(flat + u.begin, slots_[s].data.raw(), u.elements());
    held[s] = npos;
  };
  for (size_t i = 0; i < layout_.units().size(); ++i) {
    const size_t s = i % 2;
    finish(s);
    const UnitShard& u = layout_.unit(i);
    // The owned slice goes into its place in the gathered layout, its
    // padding zeroed; the all-gather takes it from there (in place).
    float* mine = slots_[s].data.raw() + size_t(r) * u.slice;
    memory_.zero(mine, u.slice * sizeof(float));
    if (u.owned.size() > 0) backend_.copy(mine, flat + u.owned.begin, u.owned.size());
    slots_[s].work =
        collectives_->all_gather_async(comm::Buffer(std::span(slots_[s].data.raw(), layout_.gathered_size(u))));
    held[s] = i;
  }
  finish(0);
  finish(1);
}

}  // namespace meshtrain::parallel
