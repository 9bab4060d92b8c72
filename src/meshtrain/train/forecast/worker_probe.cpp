#include "meshtrain/train/forecast/worker_probe.hpp"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <thread>
#include <vector>

#include "meshtrain/core/memory.hpp"
#include "meshtrain/core/statistics.hpp"
#include "meshtrain/core/stopwatch.hpp"
#include "meshtrain/core/threads.hpp"
#include "meshtrain/data/loader.hpp"
#include "meshtrain/kernels/backend.hpp"
#include "meshtrain/optim/factory.hpp"
#include "meshtrain/train/config/section_configs.hpp"
#include "meshtrain/train/engine/model_factory.hpp"
#include "meshtrain/train/engine/train_step.hpp"

namespace meshtrain {
namespace {

using Clock = std::chrono::steady_clock;

// `steps` timed steps (after two untimed ones) of `model` on worker `rank`'s
// batch, on `threads` OpenMP threads of the calling thread. Off the CPU the
// host waits for the device's queue at the end of each timed part: its
// kernels run behind the calls that queue them.
StepTimes time_steps(const JobConfig& config, Model& model, int workers, int rank, int threads, int steps) {
  const auto optimizer = make_optimizer(to_optimizer_config(config.optimizer), model.store());
  DataLoader loader = job_data_loader(config, rank, workers);
  kernels::Backend& backend = kernels::backend_for(model.store().device());
  use_threads(threads);
  // Micro-batches (gradient accumulation) run one after another, so the
  // activations are one micro-batch's (train_step.hpp).
  const int64_t micro_batches = config.parallel.micro_batches;
  Batch batch, micro_batch;
  std::vector<double> fwd_bwd, update, forward;
  constexpr int kWarmup = 2;
  for (int i = 0; i < kWarmup + steps; ++i) {
    loader.next_batch(batch);
    const auto t0 = Clock::now();
    double t_f = 0;
    model.store().zero_grads();
    for (int64_t m = 0; m < micro_batches; ++m) {
      const int64_t size = batch.batch_size / micro_batches;
      if (micro_batches > 1) copy_samples(batch, m * size, size, micro_batch);
      const auto tm = Clock::now();
      model.forward(micro_batches > 1 ? micro_batch : batch);
      backend.finish();  // the forward's own time: what a prefetched gather hides behind
      t_f += seconds_since(tm);
      model.backward();
    }
    backend.finish();
    const double t_fb = seconds_since(t0);
    const auto t1 = Clock::now();
    gradient_norm(model.store(), config.optimizer.grad_clip);
    optimizer->step(model.store(), static_cast<float>(config.optimizer.lr * 1e-3));
    backend.finish();
    if (i >= kWarmup) fwd_bwd.push_back(t_fb), update.push_back(seconds_since(t1)), forward.push_back(t_f);
  }
  return {median(fwd_bwd), median(update), median(forward)};
}

}  // namespace

// Worker `worker`'s model on `device`: with tensor parallelism its tensor
// rank's shards, with expert parallelism its expert rank's experts,
// computing the busiest expert rank's rows (mirrored_expert_group.hpp); the
// probe times compute, the collectives are costed by the link model. Its
// layers compute as the job's will (training.recompute, precision and
// attention).
std::unique_ptr<Model> make_initialized_model(const JobConfig& config, int worker, ProbeGroups& groups,
                                              const Device& device) {
  const int tensor = int(config.parallel.tensor), expert = int(config.parallel.expert);
  kernels::Backend* where = &kernels::backend_for(device);  // the stand-ins copy where the model's tensors are
  if (tensor > 1)
    groups.tp = std::make_unique<parallel::SoloTensorGroup>(worker % tensor, tensor, config.parallel.sequence_parallel,
                                                            where);
  if (expert > 1 && config.model.n_expert > 1)
    groups.ep = std::make_unique<parallel::MirroredExpertGroup>(worker / tensor % expert, expert, where);
  std::unique_ptr<Model> model = make_model(
      config.model, model_layout(config.parallel, groups.tp.get(), 0, groups.ep.get(), &config.training, device));
  Rng rng(static_cast<uint64_t>(config.training.seed));
  model->init_parameters(rng);
  return model;
}

// Worker 0 alone first, on `model` (its activations and batch data are
// tracked then, in its device's memory), then all workers at once, one
// thread each with its own model: workers on one host share caches and
// memory bandwidth, and the step waits for the slowest. Workers on a
// device have one each: nothing to contend for, so one runs.
Probe run_probe(const JobConfig& config, Model& model, int workers, int threads, int steps) {
  const int saved_threads = omp_get_max_threads();
  const int tensor = int(config.parallel.tensor), data_ways = workers / tensor;
  Probe probe;
  MemoryTracker& tracker = MemoryTracker::of(model.store().device());
  tracker.reset_peaks();
  probe.alone = time_steps(config, model, data_ways, 0, threads, steps);
  probe.activations = tracker.peak(MemoryKind::Activations);
  probe.data = tracker.peak(MemoryKind::Data);
  probe.contended = probe.alone;
  if (workers > 1 && model.store().device().is_cpu()) {
    std::vector<StepTimes> times(workers);
    std::vector<std::exception_ptr> errors(workers);
    std::vector<std::thread> running;
    for (int r = 0; r < workers; ++r)
      running.emplace_back([&, r] {
        try {
          ProbeGroups groups;
          times[r] = time_steps(config, *make_initialized_model(config, r, groups, model.store().device()),
                                data_ways, r / tensor, threads, steps);
        } catch (...) {
          errors[r] = std::current_exception();
        }
      });
    for (std::thread& t : running) t.join();
    for (const auto& e : errors)
      if (e) std::rethrow_exception(e);
    probe.contended = {};
    for (const StepTimes& t : times) {
      probe.contended.forward_backward_s = std::max(probe.contended.forward_backward_s, t.forward_backward_s);
      probe.contended.update_s = std::max(probe.contended.update_s, t.update_s);
    }
  }
  use_threads(saved_threads);
  return probe;
}


}  // namespace meshtrain
