#include "meshtrain/train/engine/train_step.hpp"

#include <cmath>
#include <string>

#include "meshtrain/comm/flight/flight_recorder.hpp"
#include "meshtrain/core/error.hpp"
#include "meshtrain/kernels/backend.hpp"
#include "meshtrain/optim/clip.hpp"
#include "meshtrain/parallel/tensor/gradient_squares.hpp"
#include "meshtrain/train/engine/divergence.hpp"

namespace meshtrain {

float gradient_norm(ParamStore& store, double max_norm) {
  if (max_norm > 0) return clip_grad_norm(store, static_cast<float>(max_norm));
  return static_cast<float>(std::sqrt(grad_squared_norm(store)));
}


namespace {

// The global squared norm of the gradients the workers hold (the rule is
// train_step.hpp's). With one tensor way the squares are one sum over what
// the rank holds, exactly clip_grad_norm's.
double global_squared_norm(const HeldGradients& held, const ParamStore& store, parallel::ParallelContext& workers,
                           const MicroBatchRunner& micro_batches) {
  double duplicate[2];  // replicated, sharded
  micro_batches.duplicate_squares(held, duplicate[0], duplicate[1]);
  double squares = 0;
  if (workers.tensor_size() == 1 && workers.expert_size() == 1) {
    squares = kernels::backend_for(store.device()).squared_norm(held.values.data(), 0, held.values.size()) -
              (duplicate[0] + duplicate[1]);
    if (held.data_sharded) workers.data_sum({&squares, 1});
  } else {
    const parallel::GradSquares parts = parallel::grad_squares_by_placement(store, held.values, held.segments);
    // Replicated, tensor-sharded, tensor-sharded expert, replicated expert:
    // the middle two sum over the tensor ranks, the last two over the
    // expert ranks. (The tied embedding's duplicate is never an expert.)
    double sums[4] = {parts.replicated - duplicate[0], parts.sharded - duplicate[1], parts.expert_sharded,
                      parts.expert_replicated};
    if (held.data_sharded) workers.data_sum(sums);
    workers.tensor_sum({&sums[1], 2});
    workers.expert_sum({&sums[2], 2});
    squares = sums[0] + sums[1] + sums[2] + sums[3];
  }
  workers.pipeline_sum({&squares, 1});
  return squares;
}

// The global gradient norm before clipping; clips what the rank holds to
// max_norm (> 0).
float clip_global_norm(const HeldGradients& held, const ParamStore& store, parallel::ParallelContext& workers,
                       const MicroBatchRunner& micro_batches, double max_norm) {
  const double norm = std::sqrt(global_squared_norm(held, store, workers, micro_batches));
  if (max_norm > 0) {
    const float coef = clip_coefficient(norm, static_cast<float>(max_norm));
    if (coef < 1.0f) kernels::backend_for(store.device()).scale(held.values.data(), held.values.size(), coef);
  }
  return static_cast<float>(norm);
}

}  // namespace

StepResult run_train_step(const StepContext& ctx, const Batch& batch, int64_t step) {
  GradientReduction& gradients = ctx.gradients;
  const int64_t micro_batches = ctx.settings.micro_batches;
  gradients.begin_step();
  if (ctx.moe) ctx.moe->begin_step();
  const double loss_sum = ctx.micro_batches.train(batch, gradients);
  comm::flight::set_phase(comm::flight::Phase::Communication);
  StepResult r;
  gradients.finish_backward();
  r.comm = gradients.communication();
  const HeldGradients held = gradients.gradients();
  ctx.micro_batches.finish_gradients(held);
  // The sum of the micro-batches' mean gradients -> the batch's mean.
  if (micro_batches > 1)
    kernels::backend_for(ctx.model.store().device())
        .scale(held.values.data(), held.values.size(), 1.0f / static_cast<float>(micro_batches));
  if (ctx.moe) ctx.moe->add_balancing_gradients(held);
  // The global batch's mean: every data rank's share is the same size.
  // Tensor ranks share their batch and hold the same loss: not summed.
  double global_sum = static_cast<float>(loss_sum / static_cast<double>(micro_batches));
  ctx.workers.data_sum({&global_sum, 1});
  r.loss = static_cast<float>(global_sum / ctx.workers.data_size());
  // After an all-reduce the gradients are the same bits on every worker, so
  // the norm, the clipping and the update are too.
  r.grad_norm = clip_global_norm(held, ctx.model.store(), ctx.workers, ctx.micro_batches, ctx.settings.grad_clip);
  if (!std::isfinite(r.loss) || !std::isfinite(r.grad_norm)) stop_diverged(ctx, held, step, r.loss, r.grad_norm);
  r.lr = scheduled_lr(ctx.settings.schedule, ctx.settings.base_lr, step);
  if (ctx.guard && ctx.guard->skip_update(r.loss, r.grad_norm)) {
    r.skipped = "spike";  // the gradients are dropped; the next step zeroes them
    return r;
  }
  comm::flight::set_phase(comm::flight::Phase::Optimizer);
  gradients.update(ctx.optimizer, static_cast<float>(r.lr));
  if (ctx.moe) {
    ctx.moe->after_update();
    r.moe = ctx.moe->report();
  }
  return r;
}

}  // namespace meshtrain
