#include "meshtrain/parallel/zero/zero_engine.hpp"

#include <optional>
#include <string>

#include "meshtrain/core/error.hpp"
#include "meshtrain/kernels/backend.hpp"

namespace meshtrain::parallel {
namespace {

// Checked before the members are built: a sharded ParamGatherer frees the
// store's flat parameters, which a refused stage must leave whole.
int checked_stage(int stage) {
  if (stage < 1 || stage > 3) throw Error("ZeroEngine: stage must be 1, 2 or 3, got " + std::to_string(stage));
  return stage;
}

}  // namespace

ZeroEngine::ZeroEngine(ParamStore& store, comm::ProcessGroup& group, int stage, Precision wire)
    : store_(store),
      group_(group),
      stage_(checked_stage(stage)),
      layout_(store, group.rank(), group.size()),
      params_(store, layout_, group, ledger_, stage >= 3, wire) {
  if (stage >= 2) grads_.emplace(store, layout_, group, ledger_, wire);
  store.set_unit_observer(this);
}

ZeroEngine::~ZeroEngine() { store_.set_unit_observer(nullptr); }

void ZeroEngine::begin_step() {
  if (stage_ >= 3) {
    order_.begin_step();
    params_.gather_whole_step();
    if (const size_t first = order_.first(); first != BlockOrder::npos) params_.prefetch(first);
  }
  if (grads_) grads_->start_backward();
}

void ZeroEngine::begin_next_micro_batch() {
  if (grads_) grads_->start_backward(/*accumulate=*/true);
}

void ZeroEngine::finish_backward() {
  if (grads_) grads_->finish_backward();
}

// On the store's device (the CPU's backend runs kernels/norm.hpp's sum and scale).
double ZeroEngine::grad_squared_norm_local() {
  auto shard = grad_shard();
  return kernels::backend_for(store_.device()).squared_norm(shard.data(), 0, shard.size());
}

void ZeroEngine::scale_grads(float factor) {
  auto shard = grad_shard();
  kernels::backend_for(store_.device()).scale(shard.data(), shard.size(), factor);
}

UpdateBuffers ZeroEngine::update_buffers() {
  UpdateBuffers b;
  if (stage_ >= 3) {
    b.params = params_.shard();
    b.params_in_shard = true;
  } else {
    b.params = store_.kernel_params().data();  // the device's, off the CPU (stages 1 and 2)
  }
  if (grads_) {
    b.grads = grads_->shard();
    b.grads_in_shard = true;
  } else {
    b.grads = store_.kernel_grads().data();
  }
  return b;
}

void ZeroEngine::after_update() {
  if (stage_ >= 3)
    params_.release_all();
  else
    params_.all_gather_flat();
}

// Evaluation's gathers are not a training step's: left out of the report.
void ZeroEngine::begin_evaluation() {
  evaluating_ = true;
  ledger_.set_recording(false);
  if (stage_ >= 3) params_.gather_whole_step();
}

void ZeroEngine::end_evaluation() {
  if (stage_ >= 3) params_.release_all();
  params_.take_gathers_on_demand();
  ledger_.set_recording(true);
  evaluating_ = false;
}

ZeroCommunication ZeroEngine::communication() {
  ZeroCommunication c{.time = ledger_.settle(), .gathers_on_demand = std::nullopt};
  if (stage_ >= 3) c.gathers_on_demand = params_.take_gathers_on_demand();
  return c;
}

size_t ZeroEngine::next_block(size_t unit, UnitPass pass) const {
  const auto& units = layout_.units();
  if (pass == UnitPass::Forward) {
    for (size_t u = unit + 1; u < units.size(); ++u)
      if (!units[u].whole_step) return u;
  } else {
    for (size_t u = unit; u-- > 0;)
      if (!units[u].whole_step) return u;
  }
  return ParamGatherer::npos;
}

void ZeroEngine::before_unit(size_t unit, UnitPass pass) {
  if (layout_.unit(unit).whole_step) return;  // gathered and staged for the whole step
  if (stage_ >= 3) {
    const std::optional<size_t> on_record = evaluating_ ? std::nullopt : order_.enter(unit);
    params_.acquire(unit, on_record ? *on_record : next_block(unit, pass));
  }
  if (grads_ && pass == UnitPass::Backward) grads_->acquire(unit);
}

void ZeroEngine::after_unit(size_t unit, UnitPass pass) {
  if (layout_.unit(unit).whole_step) return;
  if (stage_ >= 3) params_.release(unit);
  if (grads_ && pass == UnitPass::Backward) grads_->reduce(unit);
}

}  // namespace meshtrain::parallel
