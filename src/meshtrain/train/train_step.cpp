#include "meshtrain/train/train_step.hpp"

#include <cmath>
#include <string>

#include "meshtrain/core/error.hpp"
#include "meshtrain/optim/clip.hpp"

namespace meshtrain {

float gradient_norm(ParamStore& store, double max_norm) {
  if (max_norm > 0) return clip_grad_norm(store, static_cast<float>(max_norm));
  return static_cast<float>(std::sqrt(squared_norm_range(store.grads(), 0, store.flat_size())));
}

StepResult run_train_step(const StepContext& ctx, const Batch& batch, int64_t step) {
  ParamStore& store = ctx.model.store();
  store.zero_grads();
  if (ctx.sync) ctx.sync->start_backward();
  ForwardResult fwd = ctx.model.forward(batch);
  ctx.model.backward();
  StepResult r;
  r.loss = fwd.loss;
  if (ctx.sync) {
    r.comm = ctx.sync->finish_backward();
    double loss_sum = fwd.loss;  // the global batch's mean: every worker's share is the same size
    ctx.workers.sum({&loss_sum, 1});
    r.loss = static_cast<float>(loss_sum / ctx.workers.size());
  }
  // The gradients are the same bits on every worker after the all-reduce, so
  // the norm, the clipping and the update are too.
  r.grad_norm = gradient_norm(store, ctx.grad_clip);
  if (!std::isfinite(r.loss) || !std::isfinite(r.grad_norm))
    throw Error("step " + std::to_string(step + 1) + ": loss or gradient is not finite (loss " +
                std::to_string(r.loss) + "); lower optimizer.lr or enable optimizer.grad_clip");
  r.lr = scheduled_lr(ctx.schedule, ctx.base_lr, step);
  ctx.optimizer.step(store, static_cast<float>(r.lr));
  return r;
}

}  // namespace meshtrain
