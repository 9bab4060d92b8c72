#include "meshtrain/train/engine/step_machinery.hpp"

#include <algorithm>

#include "meshtrain/optim/factory.hpp"
#include "meshtrain/parallel/host_staging.hpp"

namespace meshtrain {
namespace {

// LAMB and LARS take per-view norms (two sums per view). A view split across
// workers adds its partial sums: over the data ranks when ZeRO shards the
// store, and over the tensor ranks when the tensor is sharded there.
void attach_view_sum_reducer(Optimizer& optimizer, const ParamStore& store, parallel::ParallelContext& workers,
                             bool data_sharded) {
  std::vector<size_t> tensor_sharded;  // views whose sums add over the tensor ranks
  if (workers.tensor_size() > 1)
    for (size_t v = 0; v < store.views().size(); ++v)
      if (!store.views()[v].placement.replicated()) tensor_sharded.push_back(v);
  if (!data_sharded && tensor_sharded.empty()) return;
  optimizer.set_view_sum_reducer([&workers, data_sharded, tensor_sharded](std::span<double> sums) {
    if (data_sharded) workers.data_sum(sums);
    if (tensor_sharded.empty()) return;
    std::vector<double> parts;
    parts.reserve(2 * tensor_sharded.size());
    for (size_t v : tensor_sharded) parts.insert(parts.end(), {sums[2 * v], sums[2 * v + 1]});
    workers.tensor_sum(parts);
    for (size_t i = 0; i < tensor_sharded.size(); ++i) {
      sums[2 * tensor_sharded[i]] = parts[2 * i];
      sums[2 * tensor_sharded[i] + 1] = parts[2 * i + 1];
    }
  });
}

}  // namespace

StepMachinery make_step_machinery(const StepSettings& settings, const ParallelSection& parallel, Model& model,
                                  parallel::ParallelContext& workers) {
  StepMachinery m;
  m.micro_batches = make_micro_batches(parallel, model, workers);
  ParamStore& store = model.store();
  const OptimizerConfig& optimizer_config = settings.optimizer;
  comm::ProcessGroup* group = workers.data_group();
  if (!group) {
    m.optimizer = make_optimizer(optimizer_config, store);
    attach_view_sum_reducer(*m.optimizer, store, workers, false);
    m.gradients = solo_gradients(store);
    return m;
  }
  const int stage = settings.zero_stage;
  if (stage <= 1) {
    const size_t bucket_bytes = settings.bucket_bytes;
    m.sync = std::make_unique<parallel::GradientSync>(
        store, *group,
        parallel::GradientSyncOptions{.algorithm = workers.algorithm(),
                                      .bucket_bytes = bucket_bytes,
                                      .first_bucket_bytes = std::min<size_t>(size_t{1} << 20, bucket_bytes),
                                      .dtype = settings.reduce_dtype},
        parallel::ExpertReduction{.group = workers.expert_data_group(), .ways = workers.expert_size()});
    m.sync->broadcast_parameters();
  } else {
    AlignedBuffer<float> host;  // off the CPU, the parameters' copy the broadcast runs on
    parallel::on_host(store.device_memory(), store.kernel_params(), host,
                      [&](std::span<float> params) { group->broadcast(params, 0); });
  }
  if (stage == 0) {
    m.optimizer = make_optimizer(optimizer_config, store);
    attach_view_sum_reducer(*m.optimizer, store, workers, false);
    m.gradients = all_reduce_gradients(store, *m.sync);
    return m;
  }
  m.zero = std::make_unique<parallel::ZeroEngine>(store, *group, stage, settings.reduce_dtype);
  m.optimizer = make_optimizer(optimizer_config, store, m.zero->layout().segments());
  attach_view_sum_reducer(*m.optimizer, store, workers, true);
  m.gradients = zero_gradients(store, *m.zero, m.sync.get());
  return m;
}

}  // namespace meshtrain
