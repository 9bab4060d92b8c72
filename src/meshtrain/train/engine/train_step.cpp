#include "meshtrain/train/engine/train_step.hpp"

#include <cmath>
#include <functional>
#include <string>

#include "meshtrain/core/error.hpp"
#include "meshtrain/optim/clip.hpp"
#include "meshtrain/parallel/tensor/gradient_squares.hpp"

namespace meshtrain {

float gradient_norm(ParamStore& store, double max_norm) {
  if (max_norm > 0) return clip_grad_norm(store, static_cast<float>(max_norm));
  return static_cast<float>(std::sqrt(squared_norm_range(store.grads(), 0, store.flat_size())));
}

namespace {

void clip_to(double norm, double max_norm, const std::function<void(float)>& scale) {
  if (max_norm <= 0) return;
  const float coef = clip_coefficient(norm, static_cast<float>(max_norm));
  if (coef < 1.0f) scale(coef);
}

// The global gradient norm before clipping, when each worker holds a shard
// of the averaged gradients; clips the shards.
float sharded_gradient_norm(parallel::ZeroEngine& zero, WorkerGroup& workers, double max_norm) {
  double squares = zero.grad_squared_norm_local();
  workers.sum({&squares, 1});
  const double norm = std::sqrt(squares);
  clip_to(norm, max_norm, [&](float coef) { zero.scale_grads(coef); });
  return static_cast<float>(norm);
}

// The same under tensor parallelism: replicated tensors count once, sharded
// ones add their squares over the tensor ranks (gradient_squares.hpp).
float tensor_parallel_gradient_norm(ParamStore& store, parallel::ZeroEngine* sharded, WorkerGroup& workers,
                                    double max_norm) {
  const FlatSegments whole{{.begin = 0, .end = store.flat_size(), .local = 0}};
  const parallel::GradSquares squares =
      sharded ? parallel::grad_squares_by_placement(store, sharded->grad_shard(), sharded->layout().segments())
              : parallel::grad_squares_by_placement(store, store.grads(), whole);
  double sums[2] = {squares.replicated, squares.sharded};
  if (sharded) workers.sum(sums);
  workers.tensor_sum({&sums[1], 1});
  const double norm = std::sqrt(sums[0] + sums[1]);
  clip_to(norm, max_norm, [&](float coef) {
    if (sharded)
      sharded->scale_grads(coef);
    else
      scale_range(store.grads(), 0, store.flat_size(), coef);
  });
  return static_cast<float>(norm);
}

}  // namespace

StepResult run_train_step(const StepContext& ctx, const Batch& batch, int64_t step) {
  ParamStore& store = ctx.model.store();
  parallel::ZeroEngine* zero = ctx.zero;
  const bool sharded_grads = zero && zero->reduces_gradients();
  const int64_t micro_batches = ctx.micro_batches;
  const int64_t micro_size = batch.batch_size / micro_batches;
  store.zero_grads();  // ZeRO-2/3 have no flat gradients: their staging is zeroed per unit
  if (zero) zero->begin_step();
  StepResult r;
  double loss_sum = 0;
  for (int64_t m = 0; m < micro_batches; ++m) {
    const bool last = m + 1 == micro_batches;
    if (m > 0 && zero) zero->begin_next_micro_batch();
    if (ctx.sync && last) ctx.sync->start_backward();
    if (micro_batches > 1) copy_samples(batch, m * micro_size, micro_size, *ctx.micro_batch);
    loss_sum += ctx.model.forward(micro_batches > 1 ? *ctx.micro_batch : batch).loss;
    ctx.model.backward();
    if (sharded_grads) r.comm.exposed_s += zero->finish_backward();
  }
  if (ctx.sync) r.comm = ctx.sync->finish_backward();
  if (micro_batches > 1) {  // the sum of the micro-batches' mean gradients -> the batch's mean
    const float inverse = 1.0f / static_cast<float>(micro_batches);
    if (sharded_grads)
      zero->scale_grads(inverse);
    else
      scale_range(store.grads(), 0, store.flat_size(), inverse);
  }
  r.loss = static_cast<float>(loss_sum / static_cast<double>(micro_batches));
  if (ctx.workers.size() > 1) {
    // The global batch's mean: every data rank's share is the same size.
    // Tensor ranks share their batch and hold the same loss: not summed.
    double global_sum = r.loss;
    ctx.workers.sum({&global_sum, 1});
    r.loss = static_cast<float>(global_sum / ctx.workers.size());
  }
  // After an all-reduce the gradients are the same bits on every worker, so
  // the norm, the clipping and the update are too; sharded gradients add
  // their squares over the workers.
  if (ctx.workers.tensor_size() > 1)
    r.grad_norm = tensor_parallel_gradient_norm(store, sharded_grads ? zero : nullptr, ctx.workers, ctx.grad_clip);
  else
    r.grad_norm = sharded_grads ? sharded_gradient_norm(*zero, ctx.workers, ctx.grad_clip)
                                : gradient_norm(store, ctx.grad_clip);
  if (!std::isfinite(r.loss) || !std::isfinite(r.grad_norm))
    throw Error("step " + std::to_string(step + 1) + ": loss or gradient is not finite (loss " +
                std::to_string(r.loss) + "); lower optimizer.lr or enable optimizer.grad_clip");
  r.lr = scheduled_lr(ctx.schedule, ctx.base_lr, step);
  if (zero) {
    ctx.optimizer.update(zero->update_buffers(), static_cast<float>(r.lr));
    zero->after_update();
  } else {
    ctx.optimizer.step(store, static_cast<float>(r.lr));
  }
  return r;
}

}  // namespace meshtrain
