#include "meshtrain/parallel/zero/param_gatherer.hpp"

#include <algorithm>
#include <cstring>

#include "meshtrain/core/error.hpp"
#include "meshtrain/kernels/bf16.hpp"

namespace meshtrain::parallel {

ParamGatherer::ParamGatherer(ParamStore& store, const ShardLayout& layout, comm::ProcessGroup& group, bool sharded,
                             Precision wire)
    : store_(store),
      layout_(layout),
      group_(group),
      sharded_(sharded),
      device_(store.device_memory()),
      bf16_(sharded && wire == Precision::Bf16) {
  const auto& units = layout.units();
  if (!sharded) {
    // Stages 1 and 2 gather every unit through the two slots' host copies.
    const size_t most = std::max(layout.max_gathered_size(true), layout.max_gathered_size(false));
    for (auto& s : slots_) s.data.ensure(nullptr, most);
    return;
  }
  for (auto& s : slots_) {
    s.data.ensure(device_, layout.max_gathered_size(false));
    if (bf16_) s.data16.ensure(layout.max_gathered_size(false));
  }
  whole_step_.ensure(device_, layout.whole_step_gathered_size());
  if (bf16_) whole_step16_.ensure(layout.whole_step_gathered_size());
  shard_.resize(device_, layout.local_size());  // zeroed: the padding past a unit's end stays 0
  AlignedBuffer<float> downloaded;              // off the CPU, the flat parameters in host memory
  if (device_) {
    downloaded.ensure(store.flat_size());
    store.download_params(downloaded.span());
  }
  const float* flat = device_ ? downloaded.data() : store.params().data();
  for (const auto& u : units)
    if (u.owned.size() > 0) std::memcpy(shard_.host() + u.local, flat + u.owned.begin, u.owned.size() * sizeof(float));
  shard_.upload(0, shard_.size());
  store.release_flat_params();
}

comm::WorkHandle ParamGatherer::gather(const UnitShard& u, StagedBuffer& out, size_t at, Bf16* out16) {
  shard_.download(u.local, u.slice);  // as the optimizer left it on the device
  const float* slice = shard_.host() + u.local;
  if (!bf16_)
    return group_.all_gather_async(std::span<const float>(slice, u.slice),
                                   std::span<float>(out.host() + at, layout_.gathered_size(u)));
  Bf16* mine = out16 + size_t(layout_.rank()) * u.slice;  // in place: the rank's segment of the gathered copy
  kernels::to_bf16(slice, mine, u.slice);
  return group_.all_gather_async(std::span<const Bf16>(mine, u.slice), std::span<Bf16>(out16, layout_.gathered_size(u)));
}

void ParamGatherer::finish_gather(const UnitShard& u, StagedBuffer& out, size_t at, const Bf16* out16) {
  if (bf16_) kernels::to_float(out16, out.host() + at, layout_.gathered_size(u));
  out.upload(at, layout_.gathered_size(u));
}

void ParamGatherer::gather_whole_step() {
  std::vector<comm::WorkHandle> work;
  for (const auto& u : layout_.units()) {
    if (!u.whole_step) continue;
    work.push_back(
        gather(u, whole_step_, u.whole_step_offset, bf16_ ? whole_step16_.data() + u.whole_step_offset : nullptr));
    store_.bind_unit_params(u.unit, whole_step_.kernel() + u.whole_step_offset);
  }
  for (auto& w : work) w->wait();
  for (const auto& u : layout_.units())
    if (u.whole_step)
      finish_gather(u, whole_step_, u.whole_step_offset, bf16_ ? whole_step16_.data() + u.whole_step_offset : nullptr);
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
  const UnitShard& u = layout_.unit(unit);
  slot.unit = unit;
  slot.work = gather(u, slot.data, 0, slot.data16.data());
}

void ParamGatherer::wait(Slot& slot) {
  if (slot.work) {
    auto work = std::move(slot.work);
    slot.work = nullptr;
    work->wait();
    if (slot.unit != npos) finish_gather(layout_.unit(slot.unit), slot.data, 0, slot.data16.data());
  }
}

void ParamGatherer::acquire(size_t unit, size_t next) {
  Slot& slot = slot_of(unit);
  if (slot.unit != unit) {
    if (slot.in_use)
      throw Error("zero-3: unit " + store_.units()[unit].name + " needs the gather buffer that unit " +
                  store_.units()[slot.unit].name + " still uses");
    wait(slot);
    start_gather(unit, slot);
  }
  wait(slot);
  slot.in_use = true;
  store_.bind_unit_params(unit, slot.data.kernel());
  if (next == npos) return;
  Slot& ahead = slot_of(next);
  if (ahead.unit == next || ahead.in_use) return;  // already there, or busy: gathered on demand
  wait(ahead);
  start_gather(next, ahead);
}

void ParamGatherer::release(size_t unit) {
  Slot& slot = slot_of(unit);
  if (slot.unit == unit) slot.in_use = false;
  store_.bind_unit_params(unit, nullptr);
}

void ParamGatherer::all_gather_flat() {
  // Off the CPU the slices travel through the slots in host memory: each
  // rank's owned slice downloaded into its place, the gathered unit
  // uploaded (the host-staged path, docs/gpu.md).
  const bool staged = !store_.on_host();
  float* flat = staged ? nullptr : store_.params().data();
  const int r = layout_.rank();
  // Two slots in turn: while one unit's gather runs, the previous one is
  // copied into the flat buffer.
  std::array<size_t, 2> held{npos, npos};
  auto finish = [&](size_t s) {
    if (held[s] == npos) return;
    wait(slots_[s]);
    const UnitShard& u = layout_.unit(held[s]);
    if (staged)
      store_.upload_params_range(u.begin, std::span<const float>(slots_[s].data.host(), u.elements()));
    else
      std::memcpy(flat + u.begin, slots_[s].data.host(), u.elements() * sizeof(float));
    held[s] = npos;
  };
  for (size_t i = 0; i < layout_.units().size(); ++i) {
    const size_t s = i % 2;
    finish(s);
    const UnitShard& u = layout_.unit(i);
    // The slice goes into its place in the gathered layout; the all-gather
    // takes it from there (in place), padding zeroed.
    float* mine = slots_[s].data.host() + size_t(r) * u.slice;
    std::memset(mine, 0, u.slice * sizeof(float));
    if (u.owned.size() > 0 && staged)
      store_.download_params_range(u.owned.begin, std::span<float>(mine, u.owned.size()));
    else if (u.owned.size() > 0)
      std::memcpy(mine, flat + u.owned.begin, u.owned.size() * sizeof(float));
    slots_[s].work = group_.all_gather_async(std::span<const float>(mine, u.slice),
                                             std::span<float>(slots_[s].data.host(), layout_.gathered_size(u)));
    held[s] = i;
  }
  finish(0);
  finish(1);
}

}  // namespace meshtrain::parallel
