#pragma once
// ZeRO's parameter side.
//
// Stage 3 (FSDP): the rank keeps only its shard of the parameters. A unit's
// parameters are all-gathered into a gather buffer just before its forward
// and again before its backward, the store's views of the unit are pointed
// at that buffer, and freed (unbound) after; while one block computes, the
// next block's gather runs on the communication thread (prefetch; which
// block is next: zero_engine.hpp). Blocks share two gather buffers, the one
// in use and the one the prefetch fills, so a prefetch never overwrites the
// block in use. A block whose gather was not prefetched is gathered when it
// is needed, and counted (take_gathers_on_demand). Whole-step units
// (embeddings, final norm) are gathered once per step into buffers of their
// own.
//
// Stages 1 and 2: parameters stay whole; after each rank has updated its
// owned slices, all_gather_flat() brings every rank's slices into the flat
// buffer.
//
// The shard and the gather buffers live in the store's memory (the
// device's off the CPU), and the gathers are the device collectives'
// (comm/device/): a rank's slice is copied (under bf16, rounded) into its
// place in a gather buffer and all-gathered there in place, over NCCL or
// staged through host memory (docs/gpu.md); copies and rounding run on the
// store's backend.
//
// Every wait for a gather goes into the step's OverlapLedger (the overlap
// report's exposed time).
//
// Gather buffers are counted as MemoryKind::Communication: two of the
// largest block's gathered size, plus the whole-step units' (stage 3), or
// two of the largest unit's (stages 1 and 2).
#include <array>
#include <cstddef>
#include <memory>
#include <utility>

#include "meshtrain/comm/device/device_collectives.hpp"
#include "meshtrain/comm/device/overlap_ledger.hpp"
#include "meshtrain/comm/group/process_group.hpp"
#include "meshtrain/core/bf16.hpp"
#include "meshtrain/core/device_array.hpp"
#include "meshtrain/core/param_store.hpp"
#include "meshtrain/kernels/backend.hpp"
#include "meshtrain/parallel/zero/shard_layout.hpp"

namespace meshtrain::parallel {

class ParamGatherer {
 public:
  // sharded: stage 3. Copies the rank's slices out of the store's flat
  // parameters (equal on every rank), then frees them.
  // wire = Bf16 (stage 3 only): the slices travel as bf16 and every rank,
  // the owner included, computes with the same bf16-rounded parameters
  // (FSDP's param_dtype); the shard stays fp32.
  // `ledger` (kept) takes every wait for a gather.
  ParamGatherer(ParamStore& store, const ShardLayout& layout, comm::ProcessGroup& group, comm::OverlapLedger& ledger,
                bool sharded, Precision wire = Precision::Fp32);
  ParamGatherer(const ParamGatherer&) = delete;
  ParamGatherer& operator=(const ParamGatherer&) = delete;

  bool sharded() const { return sharded_; }
  // Stage 3: the rank's parameter shard (layout.local_size() elements),
  // where the optimizer updates it (the device's memory off the CPU).
  float* shard() { return shard_.raw(); }

  // Stage 3. Gathers every whole-step unit and binds it (blocking).
  void gather_whole_step();
  // Stage 3. After the update: unbinds everything; gathered copies are stale.
  void release_all();
  // Stage 3. Before a block's forward or backward: waits for (or starts)
  // its gather and binds it. Then prefetches `next` (a block index, or
  // npos for none).
  void acquire(size_t unit, size_t next);
  // Stage 3. Starts gathering block `unit` into the buffer not in use,
  // unless it is there already (or both are in use: it is then gathered
  // when needed).
  void prefetch(size_t unit);
  // Stage 3. After a block's forward or backward: unbinds it. Its gathered
  // copy stays valid until its buffer is reused or release_all().
  void release(size_t unit);

  // Stages 1 and 2: every unit's owned slice, taken from each rank's flat
  // parameters, lands in every rank's flat parameters.
  void all_gather_flat();

  // Stage 3: the gathers acquire() had to start itself (not prefetched)
  // since the last call.
  size_t take_gathers_on_demand() { return std::exchange(gathers_on_demand_, 0); }

  static constexpr size_t npos = size_t(-1);

 private:
  struct Slot {
    explicit Slot(DeviceAllocator& memory)
        : data(memory, MemoryKind::Communication), data16(memory, MemoryKind::Communication) {}
    DeviceArray<float> data;
    DeviceArray<Bf16> data16;  // bf16 wire only
    size_t unit = npos;  // whose parameters it holds (or is receiving)
    bool in_use = false;
    comm::DeviceWorkHandle work;  // the gather into it, while not yet waited for
  };
  // The buffer holding (or receiving) `unit`'s gather; null: neither.
  Slot* holding(size_t unit);
  // A buffer not in use: an empty one, else one not holding `keep`; null: both in use.
  Slot* free_slot(size_t keep);
  // Waits for what `slot` was receiving, then starts gathering `unit` into it.
  void start_gather(size_t unit, Slot& slot);
  void wait(Slot& slot);
  // Starts gathering u's slices from the shard into `out` (under bf16
  // through out16, widened into `out` by finish_gather).
  comm::DeviceWorkHandle gather(const UnitShard& u, float* out, Bf16* out16);
  void finish_gather(const UnitShard& u, float* out, const Bf16* out16);

  ParamStore& store_;
  const ShardLayout& layout_;
  bool sharded_;
  DeviceAllocator& memory_;  // the store's device's
  kernels::Backend& backend_;
  std::unique_ptr<comm::DeviceCollectives> collectives_;
  DeviceArray<float> shard_;
  DeviceArray<float> whole_step_;
  DeviceArray<Bf16> whole_step16_;  // bf16 wire only
  bool bf16_;
  std::array<Slot, 2> slots_;
  comm::OverlapLedger& ledger_;
  size_t gathers_on_demand_ = 0;
};

}  // namespace meshtrain::parallel
