#pragma once
// What a synchronous step does with its gradients, by data-parallel
// strategy: one interface that the step (train_step.hpp) calls in a straight
// line, one implementation per strategy (make_step_machinery picks it):
//
//   SoloGradients       one data-parallel way (tensor ranks included): the
//                       gradients are the batch's as backward leaves them
//   AllReduceGradients  data parallelism (DDP): GradientSync all-reduces the
//                       buckets during the last micro-batch's backward
//   Zero1Gradients      ZeRO stage 1: the same all-reduce, the update on this
//                       rank's shard of the optimizer state, then the
//                       parameters all-gathered (ZeroEngine)
//   ShardedGradients    ZeRO stages 2 and 3: each micro-batch's backward
//                       reduce-scatters into this rank's gradient shard
//
// A step calls, in order:
//   begin_step()
//   per micro-batch m of M: begin_micro_batch(m, m == M - 1), forward,
//                           backward, end_micro_batch()
//                       (through a pipeline, per backward action k of the
//                       rank: begin_micro_batch(k, its last compute action)
//                       and end_micro_batch() around it, the forwards
//                       between them; micro_batches.hpp)
//   finish_backward()   the gradients are reduced (averaged over the data
//                       ranks), whole or sharded
//   gradients()         what this rank holds: for the 1/M scale, the norm
//                       and clipping
//   update(optimizer, lr)
//   communication()     the step's, for the overlap report, as read at
//                       finish_backward() (where the norm waits for the
//                       device anyway: ZeRO 1-2's gather after the update
//                       counts in the next step's)
// Evaluation brackets its forwards with begin_evaluation() and
// end_evaluation() (stage 3 gathers the parameters there).
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "meshtrain/comm/device/overlap_ledger.hpp"
#include "meshtrain/core/flat_segment.hpp"
#include "meshtrain/core/param_store.hpp"
#include "meshtrain/optim/optimizer.hpp"
#include "meshtrain/parallel/data_parallel/gradient_sync.hpp"
#include "meshtrain/parallel/zero/zero_engine.hpp"

namespace meshtrain {

// A step's communication, for the overlap report: data parallelism's
// all-reduce, ZeRO's gathers and reduce-scatters (comm/device/overlap_ledger.hpp).
struct StepCommunication {
  comm::CommTime time;
  std::optional<size_t> gathers_on_demand;  // ZeRO-3: block gathers its prefetch did not start
};

// The gradients one rank holds after finish_backward().
struct HeldGradients {
  std::span<float> values;       // the store's flat gradients, or this rank's shard of them
  const FlatSegments& segments;  // where values sit in the flat layout (values[s.local..] is [s.begin, s.end))
  bool data_sharded = false;     // a shard of the data ranks' gradients: its squares add over them
};

// Where a view's gradient sits in what the rank holds: its parts (none when
// ZeRO puts the view on other ranks), each with the element of the view it
// starts at.
struct HeldPart {
  std::span<float> values;
  size_t view_offset = 0;
};
std::vector<HeldPart> held_parts(const HeldGradients& held, const ParamView& view);

class GradientReduction {
 public:
  virtual ~GradientReduction() = default;

  // Before the first micro-batch: zeroes the gradients.
  virtual void begin_step() = 0;
  // Before micro-batch m's forward; `last`: the step's last micro-batch.
  virtual void begin_micro_batch(int64_t m, bool last) = 0;
  // After micro-batch m's backward.
  virtual void end_micro_batch() {}
  // After the last backward. Throws CommError when a peer fails.
  virtual void finish_backward() = 0;
  virtual HeldGradients gradients() = 0;
  // The optimizer's update at `lr` on what this rank owns.
  virtual void update(Optimizer& optimizer, float lr) = 0;
  // This step's communication (as read at finish_backward()).
  virtual StepCommunication communication() = 0;

  virtual void begin_evaluation() {}
  virtual void end_evaluation() {}
};

// The strategies above; each keeps references to what it is given.
std::unique_ptr<GradientReduction> solo_gradients(ParamStore& store);
std::unique_ptr<GradientReduction> all_reduce_gradients(ParamStore& store, parallel::GradientSync& sync);
// ZeRO: stage 1 takes the GradientSync that all-reduces its gradients;
// stages 2 and 3 none.
std::unique_ptr<GradientReduction> zero_gradients(ParamStore& store, parallel::ZeroEngine& zero,
                                                  parallel::GradientSync* sync);

}  // namespace meshtrain
