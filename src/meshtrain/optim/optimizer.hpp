#pragma once
// An optimizer updates parameters from gradients, over all of a ParamStore
// or over the segments of it that one ZeRO rank owns. Its state lives in
// flat buffers of the owned elements' layout (the whole flat layout, or the
// rank's shard layout), so a checkpoint can save it per named view and ZeRO
// shards it by construction.
//
// Every optimizer here splits its elements into fixed chunks (chunks.hpp) and
// updates them in an OpenMP loop. Chunk boundaries depend only on the layout,
// so results are bitwise identical for any thread count.
//
// The state lives in the store's device's memory (DeviceArray), and every
// optimizer updates through the device's backend (kernels/backend.hpp), so
// each runs on every device with the CPU's bits. LARS and LAMB wait for the
// device once more a step: their per-view norms come to the host, where a
// sharded view's are summed over the ranks.
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "meshtrain/core/device_array.hpp"
#include "meshtrain/core/flat_segment.hpp"
#include "meshtrain/core/param_store.hpp"
#include "meshtrain/kernels/backend.hpp"
#include "meshtrain/optim/chunks.hpp"

namespace meshtrain {

// Where one update reads gradients and writes parameters: each buffer is in
// the store's flat layout (indexed by flat offset) or in the shard layout
// (indexed by the owned segments' local offsets). ZeRO-1 updates flat
// parameters from flat gradients, ZeRO-2 flat parameters from shard
// gradients, ZeRO-3 shard parameters from shard gradients.
struct UpdateBuffers {
  float* params = nullptr;
  bool params_in_shard = false;
  const float* grads = nullptr;
  bool grads_in_shard = false;

  float* params_of(const UpdateChunk& c) const { return params + (params_in_shard ? c.local : c.flat); }
  const float* grads_of(const UpdateChunk& c) const { return grads + (grads_in_shard ? c.local : c.flat); }
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual std::string name() const = 0;
  // One update with learning rate lr (the schedule's value for this step).
  // Step t of Adam's bias correction is steps_taken() + 1; update() then
  // increments it. Allocates nothing.
  virtual void update(const UpdateBuffers& buffers, float lr) = 0;
  // update() of the store's own flat buffers; the store must have the
  // layout the optimizer was built for.
  void step(ParamStore& store, float lr) {
    chunks_.check_layout(store, name().c_str());
    update({.params = store.kernel_params().data(), .grads = store.kernel_grads().data()}, lr);
  }
  // Named state buffers, each local_size() long in the owned elements'
  // layout (e.g. "exp_avg", "exp_avg_sq"; "momentum_buffer"). Saved in
  // checkpoints. Empty when the optimizer keeps no state (SGD without momentum).
  virtual std::vector<std::pair<std::string, DeviceArray<float>*>> state_buffers() = 0;
  // Number of update() calls so far (Adam's bias correction uses it). Saved too.
  int64_t steps_taken() const { return steps_; }
  void set_steps_taken(int64_t steps) { steps_ = steps; }

  // The owned elements: the store's flat layout, or a ZeRO rank's segments.
  const UpdateChunks& chunks() const { return chunks_; }
  size_t local_size() const { return chunks_.local_size; }
  // LAMB and LARS need per-view norms; when a view is split across ranks,
  // each rank sums its part and `reducer` must sum the partial sums over the
  // ranks in place (an all-reduce). Unset: the sums are already whole.
  void set_view_sum_reducer(std::function<void(std::span<double>)> reducer) { reducer_ = std::move(reducer); }

 protected:
  Optimizer(const ParamStore& store, std::span<const FlatSegment> segments)
      : backend_(kernels::backend_for(store.device())), memory_(backend_.allocator()), chunks_(store, segments) {}
  void reduce_view_sums(std::span<double> sums) const {
    if (reducer_) reducer_(sums);
  }

  kernels::Backend& backend_;  // the store's device's: what updates
  DeviceAllocator& memory_;    // ... and where the state lives
  UpdateChunks chunks_;
  int64_t steps_ = 0;

 private:
  std::function<void(std::span<double>)> reducer_;
};

}  // namespace meshtrain
