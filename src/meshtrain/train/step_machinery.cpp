#include "meshtrain/train/step_machinery.hpp"

#include <algorithm>

#include "meshtrain/optim/factory.hpp"
#include "meshtrain/train/section_configs.hpp"

namespace meshtrain {

StepMachinery make_step_machinery(const JobConfig& config, Model& model, WorkerGroup& workers) {
  StepMachinery m;
  ParamStore& store = model.store();
  const auto optimizer_config = to_optimizer_config(config.optimizer);
  comm::ProcessGroup* group = workers.group();
  if (!group) {
    m.optimizer = make_optimizer(optimizer_config, store);
    return m;
  }
  const int stage = static_cast<int>(config.parallel.zero_stage);
  if (stage <= 1) {
    const size_t bucket_bytes = static_cast<size_t>(config.parallel.bucket_mb * (1 << 20));
    m.sync = std::make_unique<parallel::GradientSync>(
        store, *group,
        parallel::GradientSyncOptions{.algorithm = workers.algorithm(),
                                      .bucket_bytes = bucket_bytes,
                                      .first_bucket_bytes = std::min<size_t>(size_t{1} << 20, bucket_bytes)});
    m.sync->broadcast_parameters(0);
  } else {
    group->broadcast(store.params(), 0);
  }
  if (stage == 0) {
    m.optimizer = make_optimizer(optimizer_config, store);
    return m;
  }
  m.zero = std::make_unique<parallel::ZeroEngine>(store, *group, stage);
  m.optimizer = make_optimizer(optimizer_config, store, m.zero->layout().segments());
  // LAMB and LARS take per-tensor norms; a tensor split across workers adds
  // its partial sums over them.
  m.optimizer->set_view_sum_reducer([&workers](std::span<double> sums) { workers.sum(sums); });
  return m;
}

}  // namespace meshtrain
