#pragma once
// ZeRO's gradient side for stages 2 and 3: the rank keeps only its shard of
// the gradients. The store's flat gradient buffer is freed; each block's
// backward writes into a staging buffer (two, alternating, so one block's
// reduce-scatter travels while the next block computes), and when the block
// is done its gradients are reduce-scattered (averaged) straight into the
// rank's gradient shard. Whole-step units (embeddings, final norm) collect
// gradients over all of backward in staging of their own and are reduced at
// the end.
//
// Every wait for a reduce-scatter goes into the step's OverlapLedger (the
// overlap report's exposed time).
//
// Staging buffers are counted as MemoryKind::Communication: two of the
// largest block's gathered size plus the whole-step units'.
//
// Under parallel.reduce_dtype = "bf16" each staging buffer is rounded to a
// bf16 copy that is reduce-scattered (summed, each step in fp32 and rounded
// back) and widened into the shard, divided by the ranks, once it arrives.
//
// Every buffer lives in the store's device's memory and the reduce-scatters
// are the device collectives' (comm/device/, parallel/device_collectives.hpp):
// on the CPU the group's own; off it staged through host memory (each unit's
// staging downloaded, reduced by the host's collectives, the rank's segment
// uploaded into the shard). The rounding, widening and accumulation run on
// the store's backend where the gradients are.
//
// Gradient accumulation (micro-batches): the first micro-batch's backward
// reduces into the shard as above; each later one reduces into a second
// shard-sized buffer (MemoryKind::Gradients, made on first use) that
// finish_backward() adds to the shard, so the shard ends as the sum over the
// micro-batches of the workers' average.
#include <array>
#include <cstddef>
#include <memory>
#include <vector>

#include "meshtrain/comm/device/device_collectives.hpp"
#include "meshtrain/comm/device/overlap_ledger.hpp"
#include "meshtrain/comm/group/process_group.hpp"
#include "meshtrain/core/bf16.hpp"
#include "meshtrain/core/device_array.hpp"
#include "meshtrain/core/param_store.hpp"
#include "meshtrain/kernels/backend.hpp"
#include "meshtrain/parallel/zero/shard_layout.hpp"

namespace meshtrain::parallel {

class GradReducer {
 public:
  // Frees the store's flat gradients. `ledger` (kept) takes every wait for
  // a reduce-scatter.
  GradReducer(ParamStore& store, const ShardLayout& layout, comm::ProcessGroup& group, comm::OverlapLedger& ledger,
              Precision wire = Precision::Fp32);
  GradReducer(const GradReducer&) = delete;
  GradReducer& operator=(const GradReducer&) = delete;

  // The rank's averaged gradients after finish_backward()
  // (layout.local_size()), where the optimizer reads them: off the CPU, the
  // device's memory (for a backend call only).
  float* shard() { return shard_.raw(); }
  std::span<float> shard_span() { return {shard_.raw(), shard_.size()}; }

  // Before backward: zeroes and binds the whole-step units' staging.
  // accumulate: this backward's gradients add to the shard (a micro-batch
  // after the first) instead of replacing it.
  void start_backward(bool accumulate = false);
  // Before a block's backward: binds it to a zeroed staging buffer (waiting,
  // if needed, for the reduce-scatter that last used it).
  void acquire(size_t unit);
  // After a block's backward: starts its reduce-scatter and unbinds it.
  void reduce(size_t unit);
  // After backward: reduces the whole-step units and waits for everything.
  void finish_backward();

 private:
  // A reduce-scatter in flight; under bf16, the rank's reduced segment
  // still to be widened into the shard once it has arrived.
  struct Pending {
    comm::DeviceWorkHandle work;
    const UnitShard* unit = nullptr;
    const Bf16* segment = nullptr;  // bf16 only
  };
  struct Slot {
    explicit Slot(DeviceAllocator& memory)
        : data(memory, MemoryKind::Communication), data16(memory, MemoryKind::Communication) {}
    DeviceArray<float> data;
    DeviceArray<Bf16> data16;  // bf16 only
    Pending pending;
  };
  Slot& slot_of(size_t unit) { return slots_[layout_.unit(unit).block_ordinal % 2]; }
  // Starts u's reduce-scatter from `staged` (clobbered; under bf16 through staged16).
  Pending reduce_scatter(const UnitShard& u, float* staged, Bf16* staged16);
  // Waits for `pending` (in the ledger's open group) and, under bf16, widens
  // its segment into the shard.
  void complete(Pending& pending);
  float* target(const UnitShard& u) { return (accumulate_ ? incoming_.raw() : shard_.raw()) + u.local; }
  void zero(float* at, size_t count) { memory_.zero(at, count * sizeof(float)); }

  ParamStore& store_;
  const ShardLayout& layout_;
  DeviceAllocator& memory_;  // the store's device's
  kernels::Backend& backend_;
  std::unique_ptr<comm::DeviceCollectives> collectives_;
  DeviceArray<float> shard_;
  DeviceArray<float> incoming_;  // a later micro-batch's reduced gradients
  bool accumulate_ = false;
  DeviceArray<float> whole_step_;
  DeviceArray<Bf16> whole_step16_;  // bf16 only
  bool bf16_;
  std::array<Slot, 2> slots_;
  comm::OverlapLedger& ledger_;
};

}  // namespace meshtrain::parallel
