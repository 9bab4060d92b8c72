#include "meshtrain/train/loop/trainer.hpp"

#include <omp.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <memory>
#include <optional>

#include "meshtrain/core/error.hpp"
#include "meshtrain/data/loader.hpp"
#include "meshtrain/kernels/gemm.hpp"
#include "meshtrain/optim/schedule.hpp"
#include "meshtrain/train/loop/checkpoint_saver.hpp"
#include "meshtrain/train/loop/evaluator.hpp"
#include "meshtrain/train/loop/heartbeat.hpp"
#include "meshtrain/train/engine/memory_budget.hpp"
#include "meshtrain/train/report/metrics_log.hpp"
#include "meshtrain/train/engine/model_factory.hpp"
#include "meshtrain/train/report/progress.hpp"
#include "meshtrain/train/ps/ps_worker.hpp"
#include "meshtrain/train/config/section_configs.hpp"
#include "meshtrain/train/engine/step_machinery.hpp"
#include "meshtrain/train/loop/train_checkpoint.hpp"
#include "meshtrain/train/engine/train_step.hpp"
#include "meshtrain/train/engine/worker_group.hpp"

namespace meshtrain {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Fails before any training if checkpoints could not be written later,
// so a long run does not die at its first checkpoint.
void check_writable_dir(const std::string& dir, const char* key) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir))
    throw IoError(std::string(key) + ": cannot create directory '" + dir + "'" + (ec ? ": " + ec.message() : ""));
  auto probe = std::filesystem::path(dir) / ".meshtrain-write-test";
  std::FILE* f = std::fopen(probe.c_str(), "w");
  if (!f) throw IoError(std::string(key) + ": directory '" + dir + "' is not writable");
  std::fclose(f);
  std::filesystem::remove(probe, ec);
}

// The checkpoint every worker resumes from: the lead picks the newest complete
// one and the others load the same step (the checkpoint directory must be
// one that every worker sees). nullopt: start from step 0.
std::optional<std::string> agree_on_resume_checkpoint(WorkerGroup& workers, const std::string& root, std::FILE* out) {
  std::optional<checkpoint::CheckpointInfo> latest;
  if (workers.is_lead()) latest = find_resume_checkpoint(root, out);
  const int64_t step = workers.broadcast_from_lead(latest ? latest->step : -1);
  if (step < 0) return std::nullopt;
  if (workers.is_lead()) return latest->path.string();
  auto path = (std::filesystem::path(root) / checkpoint::step_dir_name(step)).string();
  if (!std::filesystem::is_directory(path))
    throw CheckpointError("worker " + std::to_string(workers.rank()) + " cannot see checkpoint " + path +
                          " that worker 0 resumes from: checkpoint.dir must be shared by all workers");
  return path;
}

// Peak tracked bytes of each kind so far, in MiB, as peak_<kind>_mb.
void add_memory_peaks(nlohmann::json& record) {
  const auto& tracker = MemoryTracker::global();
  for (size_t k = 0; k < kMemoryKindCount; ++k) {
    const auto kind = static_cast<MemoryKind>(k);
    record["peak_" + std::string(memory_kind_name(kind)) + "_mb"] = double(tracker.peak(kind)) / (1 << 20);
  }
  record["peak_total_mb"] = double(tracker.peak_total()) / (1 << 20);
}

}  // namespace

TrainSummary train(const JobConfig& config, const TrainOptions& options) {
  if (config.parallel.data == DataParallelism::ParameterServer) return train_parameter_server_worker(config, options);
  const auto& tc = config.training;

  // Everything that can fail on bad input fails here, before the first step.
  const bool is_text = config.data.kind == DataKind::Text;
  const std::string ckpt_root = config.checkpoint_dir();
  check_writable_dir(ckpt_root, "checkpoint.dir");
  WorkerGroup workers(config);
  std::unique_ptr<Model> model = make_model(config.model, workers.tensor_group());
  const bool lead = workers.is_lead();
  // threads = 0: this process's share of the cores. Several workers with all
  // cores each would oversubscribe them, which slows OpenMP down many times.
  if (tc.threads > 0)
    omp_set_num_threads(static_cast<int>(tc.threads));
  else if (workers.local_size() > 1)
    omp_set_num_threads(std::max(1, omp_get_num_procs() / workers.local_size()));
  // Only the lead worker reports; the others would print the same lines.
  std::FILE* out = lead ? options.out : nullptr;
  DataLoader loader = DataLoader::from_config(to_data_config(config.data), data_seq_len(config), tc.batch_size,
                                              workers.rank(), workers.size());
  const ScheduleConfig schedule = to_schedule_config(config);
  validate_schedule(schedule);

  const int world_size = workers.size();
  const int64_t global_batch = tc.batch_size * world_size;
  const double base_lr = scaled_base_lr(config, global_batch);
  const int zero_stage = world_size > 1 ? static_cast<int>(config.parallel.zero_stage) : 0;
  check_memory_budget(config, model->store(), world_size);

  Rng init_rng(static_cast<uint64_t>(tc.seed));
  model->init_parameters(init_rng);
  StepMachinery machinery = make_step_machinery(config, *model, workers);
  Optimizer* optimizer = machinery.optimizer.get();
  parallel::GradientSync* sync = machinery.sync.get();
  parallel::ZeroEngine* zero = machinery.zero.get();
  int64_t step = 0;
  if (options.resume) {
    if (auto latest = agree_on_resume_checkpoint(workers, ckpt_root, out)) {
      TrainState state = load_train_checkpoint(*latest, config, *model, optimizer, zero);
      loader.restore(state.data);
      step = state.step;
      if (out) std::fprintf(out, "resuming from step %lld (%s)\n", (long long)step, latest->c_str());
    } else if (out) {
      std::fprintf(out, "no checkpoint in %s: starting from step 0\n", ckpt_root.c_str());
    }
  }
  const int64_t last_step = options.stop_at_step > 0 ? std::min(options.stop_at_step, tc.steps) : tc.steps;
  TrainSummary summary{.first_step = step, .last_step = step};
  if (step >= last_step) {
    if (out) std::fprintf(out, "already finished: step %lld of %lld\n", (long long)step, (long long)last_step);
    return summary;
  }

  const int64_t preds_per_sample = is_text ? config.model.block_size : 1;
  const char* unit = is_text ? "tok/s" : "samples/s";
  if (out) {
    std::fprintf(out,
                 "model %s: %zu parameters | per-device batch %lld, global batch %lld (%d worker%s) | "
                 "base lr %.4g, scale rule %s (reference batch %lld) -> effective lr %.4g | %s %s | "
                 "%d threads, GEMM %s\n",
                 model->kind().c_str(), model->store().global_parameter_count(), (long long)tc.batch_size,
                 (long long)global_batch, world_size, world_size == 1 ? "" : "s", config.optimizer.lr,
                 enum_string(config.schedule.scale_rule).c_str(), (long long)reference_batch(config), base_lr, optimizer->name().c_str(),
                 enum_string(config.schedule.decay).c_str(), omp_get_max_threads(), kernels::gemm_backend_name());
    if (sync)
      std::fprintf(out,
                   "data parallel: %d workers, all-reduce %s over %s, %zu gradient buckets (up to %.3g MiB; the "
                   "first and the last, up to 1 MiB)\n",
                   world_size, enum_string(config.parallel.all_reduce).c_str(), workers.transport_name(), sync->buckets().size(),
                   config.parallel.bucket_mb);
    if (workers.tensor_size() > 1)
      std::fprintf(out, "tensor parallel: %d ways (%s over %s); %zu of the model's parameters on this worker\n",
                   workers.tensor_size(), workers.mesh().describe().c_str(), workers.transport_name(),
                   model->store().parameter_count());
    if (zero)
      std::fprintf(out, "ZeRO stage %d: %zu units sharded over %d workers (%zu of %zu elements on this one)\n",
                   zero_stage, zero->layout().units().size(), world_size, zero->layout().local_size(),
                   model->store().flat_size());
  }
  // Setup made the whole model once on every worker; from here on the
  // peaks are the training's.
  MemoryTracker::global().reset_peaks();
  const MemoryPrediction predicted_memory =
      predict_memory(model->store(), world_size, zero_stage, optimizer_state_floats(config),
                     config.parallel.micro_batches);

  std::optional<MetricsLog> metrics;
  if (lead) metrics.emplace(config.metrics_path(), step);
  Progress progress(out ? out : options.out, options.interactive && lead);
  Batch batch, eval_batch, micro_batch;
  auto run_eval = [&](int64_t at_step) {
    machinery.gradients->begin_evaluation();
    EvalResult r = evaluate(*model, loader, tc.eval_batches, eval_batch, config.parallel.micro_batches);
    machinery.gradients->end_evaluation();
    if (world_size > 1) {
      double sums[3] = {r.loss_sum, double(r.correct), double(r.predictions)};
      workers.sum(sums);
      r = combine_eval_sums(sums[0], sums[1], sums[2], r.batches);
    }
    summary.val_loss = r.loss;
    summary.val_accuracy = r.accuracy;
    if (!lead) return;
    metrics->write({{"step", at_step}, {"val_loss", r.loss}, {"val_accuracy", r.accuracy}, {"val_batches", r.batches}});
    char line[160];
    std::snprintf(line, sizeof line, "step %lld: val_loss %.4f val_accuracy %.4f (%lld batches)", (long long)at_step,
                  r.loss, r.accuracy, (long long)r.batches);
    progress.message(line);
  };
  // Every worker writes its part (checkpoint_saver.hpp); the lead reports
  // each checkpoint once it is committed.
  CheckpointSaver saver(config, *model, *optimizer, zero, workers);
  auto report_checkpoint = [&](const std::string& path) {
    if (lead && !path.empty()) progress.message("checkpoint " + path);
  };
  auto save = [&](int64_t at_step, bool last) {
    report_checkpoint(saver.save(TrainState{at_step, loader.state()}, last));
  };

  const StepContext step_ctx{.model = *model,
                             .optimizer = *optimizer,
                             .gradients = *machinery.gradients,
                             .workers = workers,
                             .schedule = schedule,
                             .base_lr = base_lr,
                             .grad_clip = config.optimizer.grad_clip,
                             .micro_batches = config.parallel.micro_batches,
                             .micro_batch = &micro_batch};
  const auto run_start = Clock::now();
  const int64_t first_step = step;
  Heartbeat heartbeat;  // for the supervisor (parallel.heartbeat_timeout_s)
  double throughput_ema = 0;
  while (step < last_step) {
    const auto t0 = Clock::now();
    loader.next_batch(batch);
    const uint64_t sent_before = workers.bytes_sent();
    const StepResult r = run_train_step(step_ctx, batch, step);
    ++step;
    const uint64_t comm_bytes = workers.bytes_sent() - sent_before;
    check_memory_peak(config, step);
    const double step_s = seconds_since(t0);
    const double per_s = static_cast<double>(batch.batch_size * preds_per_sample * world_size) / step_s;
    throughput_ema = step == first_step + 1 ? per_s : 0.9 * throughput_ema + 0.1 * per_s;
    summary.final_loss = r.loss;
    summary.last_step = step;

    const bool log_now = step % tc.log_every == 0 || step == last_step;
    if (log_now && lead) {
      nlohmann::json rec = {{"step", step}, {"loss", r.loss}, {"lr", r.lr}, {"grad_norm", r.grad_norm},
                            {"step_ms", step_s * 1e3}, {"batch_size", tc.batch_size}, {"global_batch", global_batch},
                            {"elapsed_s", seconds_since(run_start)}};
      rec[is_text ? "tokens_per_s" : "samples_per_s"] = per_s;
      rec["gflop_per_s"] = per_s * model->flops_per_sample() / 1e9;  // per prediction (token or image)
      rec["effective_lr"] = base_lr;  // peak lr after the scaling rule
      if (workers.workers() > 1) {
        rec["workers"] = workers.workers();
        rec["data_parallel"] = world_size;
        rec["tensor_parallel"] = workers.tensor_size();
        rec["zero_stage"] = zero_stage;
        rec["comm_bytes"] = comm_bytes;  // sent by this worker in the step (loss and norm sums included)
        rec["comm_exposed_ms"] = r.comm.exposed_s * 1e3;
      }
      if (sync) {
        rec["comm_ms"] = r.comm.busy_s * 1e3;
        rec["comm_hidden_share"] = r.comm.hidden_share();
      }
      add_memory_peaks(rec);
      metrics->write(rec);
    }
    const double elapsed = seconds_since(run_start);
    if (lead)
      progress.update({.step = step, .total_steps = tc.steps, .loss = r.loss, .lr = r.lr, .throughput = throughput_ema,
                       .unit = unit, .seconds_left = elapsed / (step - first_step) * (last_step - step)},
                      log_now);
    if (tc.eval_every > 0 && step % tc.eval_every == 0 && step != last_step) run_eval(step);
    if (config.checkpoint.every > 0 && step % config.checkpoint.every == 0 && step != last_step) save(step, false);
    heartbeat.beat();  // after the step's evaluation and checkpoint too
  }
  run_eval(step);
  report_checkpoint(saver.wait());  // the one in flight, if any
  save(step, true);
  if (!lead) return summary;
  progress.finish();
  nlohmann::json peaks = {{"step", step}, {"memory", "peak"}};
  add_memory_peaks(peaks);
  metrics->write(peaks);
  if (options.memory_report) std::fputs(memory_report(predicted_memory, world_size, zero_stage).c_str(), out);
  std::fprintf(out, "done: %lld steps in %s, final loss %.4f, val_loss %.4f\n",
               (long long)(step - first_step), format_duration(seconds_since(run_start)).c_str(), summary.final_loss,
               summary.val_loss);
  return summary;
}

}  // namespace meshtrain
