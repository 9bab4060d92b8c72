#pragma once
// Sharded data parallelism (ZeRO, Rajbhandari et al. 2020; stage 3 is
// PyTorch's FSDP) for a group of data-parallel workers, on the store's flat
// buffers and the group's collectives. Per rank, for Psi parameters in fp32
// with Adam (4 + 4 + 8 bytes each):
//
//   stage  parameters   gradients   optimizer state   traffic per step
//   0      4 Psi        4 Psi       8 Psi             all-reduce (2 Psi)
//   1      4 Psi        4 Psi       8 Psi / N         all-reduce + all-gather (3 Psi)
//   2      4 Psi        4 Psi / N   8 Psi / N         reduce-scatter + all-gather (2 Psi)
//   3      4 Psi / N    4 Psi / N   8 Psi / N         2 all-gathers + reduce-scatter (3 Psi)
//
// plus gather and staging buffers (MemoryKind::Communication; see
// param_gatherer.hpp and grad_reducer.hpp). Stage 0 is plain data
// parallelism (GradientSync) and needs no engine; stage 1 keeps
// GradientSync's overlapped all-reduce and shards only the update.
//
// A step: begin_step(), forward and backward (the engine, as the store's
// UnitObserver, gathers and reduces around each unit), finish_backward(),
// communication() for the overlap report, the gradient norm from
// grad_squared_norm(), update_buffers() for the optimizer, after_update().
// Evaluation brackets its forwards with begin_evaluation() /
// end_evaluation().
//
// Stage 3 prefetches the block that the last step entered next
// (block_order.hpp); in the first step, and where a step leaves the last
// one's order, the next block in the store's order (the previous one in
// backward).
#include <memory>
#include <optional>
#include <span>

#include "meshtrain/comm/device/overlap_ledger.hpp"
#include "meshtrain/comm/group/process_group.hpp"
#include "meshtrain/core/param_store.hpp"
#include "meshtrain/optim/optimizer.hpp"
#include "meshtrain/parallel/zero/block_order.hpp"
#include "meshtrain/parallel/zero/grad_reducer.hpp"
#include "meshtrain/parallel/zero/param_gatherer.hpp"
#include "meshtrain/parallel/zero/shard_layout.hpp"

namespace meshtrain::parallel {

// The engine's communication since the last read, for the overlap report.
struct ZeroCommunication {
  comm::CommTime time;                      // every gather and reduce-scatter, and the waits for them
  std::optional<size_t> gathers_on_demand;  // stage 3: block gathers the prefetch did not start
};

class ZeroEngine final : public UnitObserver {
 public:
  // stage 1..3. The store's parameters must already be equal on every rank.
  // Stage 2 frees the flat gradients, stage 3 the flat parameters too.
  // wire: the dtype of the gradient reduce-scatters and of ZeRO-3's
  // parameter gathers (parallel.reduce_dtype); stage 1-2's gather of the
  // updated parameters stays fp32, since it writes the ranks' copies of
  // each other's master weights.
  ZeroEngine(ParamStore& store, comm::ProcessGroup& group, int stage, Precision wire = Precision::Fp32);
  ~ZeroEngine() override;
  ZeroEngine(const ZeroEngine&) = delete;
  ZeroEngine& operator=(const ZeroEngine&) = delete;

  int stage() const { return stage_; }
  const ShardLayout& layout() const { return layout_; }
  // Whether gradients arrive through GradientSync (stage 1) or this engine.
  bool reduces_gradients() const { return stage_ >= 2; }

  // Before forward. Stage 3: gathers the whole-step units.
  void begin_step();
  // Before the forward of a micro-batch after the first (gradient
  // accumulation), after finish_backward() of the one before: stages 2 and 3
  // add its gradients to the shard. Stage 3's whole-step units stay gathered.
  void begin_next_micro_batch();
  // Stages 2 and 3, after backward: the rank's averaged gradient shard is
  // complete.
  void finish_backward();
  // Sum of squares of the rank's gradient shard (stages 2 and 3; sum it
  // over the ranks for the global norm).
  double grad_squared_norm_local();
  // Multiplies the rank's gradient shard by factor (clipping).
  void scale_grads(float factor);
  // What the optimizer (built on layout().segments()) updates.
  UpdateBuffers update_buffers();
  // After the update. Stages 1 and 2: all-gathers the parameters.
  // Stage 3: drops the gathered copies (they are stale).
  void after_update();
  // Around evaluation forwards (no backward, no update). Stage 3 gathers the
  // whole-step units, then unbinds everything.
  void begin_evaluation();
  void end_evaluation();
  // The communication since the last call: after the last backward, where
  // the norm waits for the device anyway (over NCCL the host waits here for
  // the device's events, once). Stages 1 and 2's gather after the update
  // counts in the next call's. Evaluation's is not counted.
  ZeroCommunication communication();

  // Stage 3: the rank's parameters in the shard layout (what checkpoints
  // save and load); stages 1 and 2 keep them in the store's flat buffer.
  // Both shards live where the store's kernels run: off the CPU in the
  // device's memory, for a backend call or a copy only.
  std::span<float> param_shard() { return {params_.shard(), params_.sharded() ? layout_.local_size() : 0}; }
  // Stages 2 and 3: the rank's gradients in the shard layout.
  std::span<float> grad_shard() { return grads_ ? grads_->shard_span() : std::span<float>{}; }

  void before_unit(size_t unit, UnitPass pass) override;
  void after_unit(size_t unit, UnitPass pass) override;

 private:
  // The next block after (Forward) or before (Backward) `unit`, or npos.
  size_t next_block(size_t unit, UnitPass pass) const;

  ParamStore& store_;
  comm::ProcessGroup& group_;
  int stage_;
  ShardLayout layout_;
  comm::OverlapLedger ledger_;  // before the gatherer and reducer, which keep it
  ParamGatherer params_;
  std::optional<GradReducer> grads_;
  BlockOrder order_;
  bool evaluating_ = false;
};

}  // namespace meshtrain::parallel
