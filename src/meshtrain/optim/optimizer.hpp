#pragma once
// An optimizer updates the flat parameter buffer from the flat gradient
// buffer. Its state lives in flat buffers of the same layout, so ZeRO can
// shard it by range and a checkpoint can save it per named view.
//
// Every optimizer here splits the store into fixed chunks (chunks.hpp) and
// updates them in an OpenMP loop. Chunk boundaries depend only on the layout,
// so results are bitwise identical for any thread count.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "meshtrain/core/aligned_buffer.hpp"
#include "meshtrain/core/param_store.hpp"

namespace meshtrain {

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual std::string name() const = 0;
  // One update with learning rate lr (the schedule's value for this step).
  // The store must have the layout the optimizer was built for. Step t of
  // Adam's bias correction is steps_taken() + 1; step() then increments it.
  // Allocates nothing.
  virtual void step(ParamStore& store, float lr) = 0;
  // Named state buffers, each flat_size() long in the store's layout
  // (e.g. "exp_avg", "exp_avg_sq"; "momentum_buffer"). Saved in checkpoints.
  // Empty when the optimizer keeps no state (SGD without momentum).
  virtual std::vector<std::pair<std::string, AlignedBuffer<float>*>> state_buffers() = 0;
  // Number of step() calls so far (Adam's bias correction uses it). Saved too.
  int64_t steps_taken() const { return steps_; }
  void set_steps_taken(int64_t steps) { steps_ = steps; }

 protected:
  int64_t steps_ = 0;
};

}  // namespace meshtrain
