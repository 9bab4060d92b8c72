#include "meshtrain/train/ps/ps_worker.hpp"

#include <chrono>
#include <cmath>
#include <optional>
#include <string>

#include "meshtrain/core/error.hpp"
#include "meshtrain/core/threads.hpp"
#include "meshtrain/data/loader.hpp"
#include "meshtrain/parallel/parameter_server/client.hpp"
#include "meshtrain/train/config/section_configs.hpp"
#include "meshtrain/train/engine/model_factory.hpp"
#include "meshtrain/train/engine/train_step.hpp"
#include "meshtrain/train/loop/run_dir_lock.hpp"
#include "meshtrain/train/loop/step_reporter.hpp"
#include "meshtrain/train/ps/ps_job.hpp"
#include "meshtrain/train/report/metrics_log.hpp"
#include "meshtrain/train/report/prometheus_endpoint.hpp"
#include "meshtrain/train/report/throughput.hpp"

namespace meshtrain {
namespace {

using Clock = std::chrono::steady_clock;

// The sampler state after `steps` global batches from the start: epochs hold
// floor(N / G) steps and start at position 0 (sampler.hpp).
SamplerState state_after(const DistributedSampler& sampler, int64_t steps) {
  const int64_t per_epoch = sampler.steps_per_epoch();
  return SamplerState{.epoch = steps / per_epoch, .position = steps % per_epoch * sampler.global_batch_size()};
}

// One batch's gradient, clipped: the synchronous trainer clips the gradient
// of each step, and here each push is a step. Returns the loss and the norm
// before clipping; throws Error when either is not finite.
std::pair<float, float> batch_gradient(Model& model, const Batch& batch, double grad_clip, int rank, int64_t clock) {
  ParamStore& store = model.store();
  store.zero_grads();
  const ForwardResult fwd = model.forward(batch);
  model.backward();
  const float grad_norm = gradient_norm(store, grad_clip);
  if (!std::isfinite(fwd.loss) || !std::isfinite(grad_norm))
    throw Error("worker rank " + std::to_string(rank) + " at clock " + std::to_string(clock) +
                ": loss or gradient is not finite (loss " + std::to_string(fwd.loss) +
                "); lower optimizer.lr or enable optimizer.grad_clip");
  return {fwd.loss, grad_norm};
}

}  // namespace

TrainSummary train_parameter_server_worker(const JobConfig& config, const TrainOptions& options, const Device& device) {
  if (options.stop_at_step > 0)
    throw ConfigError("--stop-at-step does not apply to parallel.data = parameter_server: the servers end the job");
  const PsJob job = read_ps_job(config.parallel, "worker");
  const comm::LaunchEnv& env = job.env;
  // One job per run directory (run_dir_lock.hpp): worker 0 locks
  // training.out_dir before anything is written there, for the process's life.
  std::optional<RunDirLock> run_dir_lock;
  if (env.rank == 0) run_dir_lock.emplace(config.training.out_dir);
  const auto& tc = config.training;
  // The host's cores shared by every rank on it, servers too (core/threads.hpp).
  use_threads(threads_for(tc.threads, env.local_world_size));
  // Worker 0 serves /metrics and /healthz (metrics.prometheus_port): its own pushes.
  const std::unique_ptr<PrometheusEndpoint> prometheus =
      env.rank == 0 ? open_prometheus_endpoint(config.metrics, config.parallel.heartbeat_timeout_s, 0) : nullptr;

  DataLoader loader = job_data_loader(config, env.rank, env.num_workers());
  ModelLayout layout;
  layout.precision = tc.precision;
  layout.device = device;  // the servers stay on CPUs; pulls and pushes pass through host memory
  std::unique_ptr<Model> model = make_model(config.model, layout);
  ParamStore& store = model->store();

  parallel::ps::ClientOptions copts{.servers = job.servers, .token = env.token, .job_id = env.job_id,
                                    .rank = env.rank, .world_size = env.world_size, .timeout = job.timeout};
  parallel::ps::Client client(store, copts);
  int64_t clock = client.initial_clock();
  loader.restore(state_after(loader.sampler(), clock));
  // --resume changes nothing here: a worker always rejoins the running job.
  std::fprintf(options.out, "ps-worker rank %d of %d: %s %d servers at clock %lld (server step %lld of %lld)\n",
               env.rank, env.num_workers(), clock > 0 ? "rejoined" : "joined", env.num_servers, (long long)clock,
               (long long)client.server_step(), (long long)tc.steps);
  std::fflush(options.out);

  MetricsLog metrics(tc.out_dir + "/worker-" + std::to_string(env.rank) + ".jsonl", -1, env.rank);
  TrainSummary summary{.first_step = clock, .last_step = clock};
  // A push is this worker's step: its batch alone, reported as the trainer's are.
  StepReporter reporter(throughput_unit(config.data.kind, config.model.block_size), summary, &metrics,
                        prometheus.get());
  const ThroughputUnit& unit = reporter.unit();
  Batch batch;
  const auto start = Clock::now();
  while (client.pull(store)) {
    const auto t0 = Clock::now();
    loader.next_batch(batch);
    const auto [loss, grad_norm] = batch_gradient(*model, batch, config.optimizer.grad_clip, env.rank, clock);
    if (!client.push(store)) break;
    ++clock;
    reporter.alive(clock);
    const double step_s = std::chrono::duration<double>(Clock::now() - t0).count();
    const double per_s = reporter.step_done(clock, loss, batch.batch_size, step_s);
    if (clock % tc.log_every != 0) continue;
    nlohmann::json rec = {{"clock", clock}, {"server_step", client.server_step()}, {"loss", loss},
                          {"grad_norm", grad_norm}, {"staleness", client.last_staleness()},
                          {"step_ms", step_s * 1e3}, {"rank", env.rank}};
    rec[unit.metric] = per_s;
    reporter.record(rec);
    std::fprintf(options.out, "ps-worker rank %d: clock %lld | server step %lld/%lld | loss %.4f | staleness %lld | %.0f %s\n",
                 env.rank, (long long)clock, (long long)client.server_step(), (long long)tc.steps, loss,
                 (long long)client.last_staleness(), per_s, unit.unit);
    std::fflush(options.out);
  }
  std::fprintf(options.out, "ps-worker rank %d: done: %lld pushes in %.1f s (clock %lld), last loss %.4f\n",
               env.rank, (long long)(clock - summary.first_step),
               std::chrono::duration<double>(Clock::now() - start).count(), (long long)clock, summary.final_loss);
  return summary;
}

}  // namespace meshtrain
