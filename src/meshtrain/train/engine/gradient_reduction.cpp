#include "meshtrain/train/engine/gradient_reduction.hpp"

#include <algorithm>

namespace meshtrain {

std::vector<HeldPart> held_parts(const HeldGradients& held, const ParamView& view) {
  const size_t begin = view.offset, end = view.offset + view.numel;
  std::vector<HeldPart> parts;
  for (const FlatSegment& s : held.segments) {
    const size_t lo = std::max(begin, s.begin), hi = std::min(end, s.end);
    if (lo < hi) parts.push_back({held.values.subspan(s.local + (lo - s.begin), hi - lo), lo - begin});
  }
  return parts;
}
namespace {

// Every rank holds the whole gradient and updates the whole store.
class SoloGradients : public GradientReduction {
 public:
  explicit SoloGradients(ParamStore& store)
      : store_(store), whole_{{.begin = 0, .end = store.flat_size(), .local = 0}} {}

  void begin_step() override { store_.zero_grads(); }
  void begin_micro_batch(int64_t, bool) override {}
  void finish_backward() override {}
  StepCommunication communication() override { return {}; }
  HeldGradients gradients() override { return {store_.kernel_grads(), whole_, false}; }
  void update(Optimizer& optimizer, float lr) override { optimizer.step(store_, lr); }

 protected:
  ParamStore& store_;
  const FlatSegments whole_;
};

// The overlapped all-reduce runs during the last micro-batch's backward
// only: the ones before add into the gradients (DDP's no_sync).
class AllReduceGradients : public SoloGradients {
 public:
  AllReduceGradients(ParamStore& store, parallel::GradientSync& sync) : SoloGradients(store), sync_(sync) {}

  void begin_micro_batch(int64_t, bool last) override {
    if (last) sync_.start_backward();
  }
  void finish_backward() override {
    const parallel::GradientSyncStats stats = sync_.finish_backward();
    all_reduce_ = {.busy_s = stats.busy_s, .exposed_s = stats.exposed_s};
  }
  StepCommunication communication() override { return {.time = all_reduce_, .gathers_on_demand = std::nullopt}; }

 private:
  parallel::GradientSync& sync_;
  comm::CommTime all_reduce_;  // this step's, from finish_backward()
};

// What every ZeRO stage shares: the engine around the step and evaluation,
// and the update on this rank's shard, after which the engine all-gathers
// the parameters (stages 1, 2) or drops its gathered copies (stage 3).
class ZeroUpdate {
 protected:
  explicit ZeroUpdate(parallel::ZeroEngine& zero) : zero_(zero) {}

  void begin(ParamStore& store) {
    store.zero_grads();  // stages 2, 3 have no flat gradients: their staging is zeroed per unit
    zero_.begin_step();
  }
  void next_micro_batch(int64_t m) {
    if (m > 0) zero_.begin_next_micro_batch();
  }
  void update_shard(Optimizer& optimizer, float lr) {
    optimizer.update(zero_.update_buffers(), lr);
    zero_.after_update();
  }
  // At finish_backward(): the engine's gathers and reduce-scatters since its last read.
  void read_engine_communication() { engine_ = zero_.communication(); }
  // The step's: the engine's, with `more` (stage 1's all-reduce) added.
  StepCommunication engine_communication(comm::CommTime more = {}) const {
    more += engine_.time;
    return {.time = more, .gathers_on_demand = engine_.gathers_on_demand};
  }

  parallel::ZeroEngine& zero_;

 private:
  parallel::ZeroCommunication engine_;
};

// Stage 1: gradients all-reduced whole; optimizer state sharded.
class Zero1Gradients : public AllReduceGradients, ZeroUpdate {
 public:
  Zero1Gradients(ParamStore& store, parallel::ZeroEngine& zero, parallel::GradientSync& sync)
      : AllReduceGradients(store, sync), ZeroUpdate(zero) {}

  void begin_step() override { begin(store_); }
  void begin_micro_batch(int64_t m, bool last) override {
    next_micro_batch(m);
    AllReduceGradients::begin_micro_batch(m, last);
  }
  void finish_backward() override {
    AllReduceGradients::finish_backward();
    read_engine_communication();
  }
  StepCommunication communication() override {
    return engine_communication(AllReduceGradients::communication().time);
  }
  void update(Optimizer& optimizer, float lr) override { update_shard(optimizer, lr); }
  void begin_evaluation() override { zero_.begin_evaluation(); }
  void end_evaluation() override { zero_.end_evaluation(); }
};

// Stages 2 and 3: each micro-batch's backward reduce-scatters into the
// rank's gradient shard, adding.
class ShardedGradients : public GradientReduction, ZeroUpdate {
 public:
  ShardedGradients(ParamStore& store, parallel::ZeroEngine& zero) : ZeroUpdate(zero), store_(store) {}

  void begin_step() override { begin(store_); }
  void begin_micro_batch(int64_t m, bool) override { next_micro_batch(m); }
  void end_micro_batch() override { zero_.finish_backward(); }
  void finish_backward() override { read_engine_communication(); }
  HeldGradients gradients() override { return {zero_.grad_shard(), zero_.layout().segments(), true}; }
  void update(Optimizer& optimizer, float lr) override { update_shard(optimizer, lr); }
  StepCommunication communication() override { return engine_communication(); }
  void begin_evaluation() override { zero_.begin_evaluation(); }
  void end_evaluation() override { zero_.end_evaluation(); }

 private:
  ParamStore& store_;
};

}  // namespace

std::unique_ptr<GradientReduction> solo_gradients(ParamStore& store) {
  return std::make_unique<SoloGradients>(store);
}

std::unique_ptr<GradientReduction> all_reduce_gradients(ParamStore& store, parallel::GradientSync& sync) {
  return std::make_unique<AllReduceGradients>(store, sync);
}

std::unique_ptr<GradientReduction> zero_gradients(ParamStore& store, parallel::ZeroEngine& zero,
                                                  parallel::GradientSync* sync) {
  if (sync) return std::make_unique<Zero1Gradients>(store, zero, *sync);
  return std::make_unique<ShardedGradients>(store, zero);
}

}  // namespace meshtrain
