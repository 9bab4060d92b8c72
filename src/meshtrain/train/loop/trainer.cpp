#include "meshtrain/train/loop/trainer.hpp"

#include <omp.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <optional>

#include "meshtrain/comm/bootstrap/launch_env.hpp"
#include "meshtrain/comm/flight/flight_recorder.hpp"
#include "meshtrain/core/error.hpp"
#include "meshtrain/core/stopwatch.hpp"
#include "meshtrain/core/threads.hpp"
#include "meshtrain/data/loader.hpp"
#include "meshtrain/kernels/backend.hpp"
#include "meshtrain/kernels/gemm.hpp"
#include "meshtrain/kernels/attention.hpp"
#include "meshtrain/kernels/gemm_bf16.hpp"
#include "meshtrain/parallel/parallel_context.hpp"
#include "meshtrain/train/config/rank_agreement.hpp"
#include "meshtrain/train/config/section_configs.hpp"
#include "meshtrain/train/engine/memory_budget.hpp"
#include "meshtrain/train/engine/model_factory.hpp"
#include "meshtrain/train/engine/replica_check.hpp"
#include "meshtrain/train/engine/step_machinery.hpp"
#include "meshtrain/train/engine/train_step.hpp"
#include "meshtrain/train/loop/checkpoint_saver.hpp"
#include "meshtrain/train/loop/evaluator.hpp"
#include "meshtrain/train/loop/init_from.hpp"
#include "meshtrain/train/loop/run_dir_lock.hpp"
#include "meshtrain/train/loop/step_record.hpp"
#include "meshtrain/train/loop/step_reporter.hpp"
#include "meshtrain/train/loop/stop_request.hpp"
#include "meshtrain/train/loop/train_checkpoint.hpp"
#include "meshtrain/train/loop/training_device.hpp"
#include "meshtrain/train/report/metrics_log.hpp"
#include "meshtrain/train/report/prometheus_endpoint.hpp"
#include "meshtrain/train/report/pipeline_trace.hpp"
#include "meshtrain/train/report/progress.hpp"
#include "meshtrain/train/report/rank_telemetry.hpp"
#include "meshtrain/train/report/tensorboard/tensorboard_log.hpp"

namespace meshtrain {
namespace {

using Clock = std::chrono::steady_clock;

// Fails before any training if checkpoints could not be written later,
// so a long run does not die at its first checkpoint.
const CheckpointSettings& check_writable(const CheckpointSettings& checkpoints) {
  const std::string& dir = checkpoints.root;
  const std::string key = "checkpoint.dir";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir))
    throw IoError(key + ": cannot create directory '" + dir + "'" + (ec ? ": " + ec.message() : ""));
  auto probe = std::filesystem::path(dir) / ".meshtrain-write-test";
  std::FILE* f = std::fopen(probe.c_str(), "w");
  if (!f) throw IoError(key + ": directory '" + dir + "' is not writable");
  std::fclose(f);
  std::filesystem::remove(probe, ec);
  return checkpoints;
}

// One job per run directory (run_dir_lock.hpp): the lead worker (rank 0)
// locks training.out_dir before anything is written there and holds it for
// the process's life. Taken first, before the rendezvous: a second job on
// the directory stops at once.
std::optional<RunDirLock> lock_run_dir(const TrainingSection& training) {
  std::optional<RunDirLock> lock;
  if (comm::read_launch_env().rank == 0) lock.emplace(training.out_dir);
  return lock;
}

// threads = 0: this process's share of the cores (core/threads.hpp).
void use_cores(int64_t threads, int local_workers) { use_threads(threads_for(threads, local_workers)); }

// The checkpoint every worker resumes from: the lead picks the newest complete
// one and the others load the same step (the checkpoint directory must be
// one that every worker sees). nullopt: start from step 0.
std::optional<std::string> agree_on_resume_checkpoint(parallel::ParallelContext& workers, const std::string& root,
                                                      std::FILE* out) {
  std::optional<checkpoint::CheckpointInfo> latest;
  if (workers.is_lead()) latest = find_resume_checkpoint(root, out);
  const int64_t step = workers.broadcast_from_lead(latest ? latest->step : -1);
  if (step < 0) return std::nullopt;
  if (workers.is_lead()) return latest->path.string();
  auto path = (std::filesystem::path(root) / checkpoint::step_dir_name(step)).string();
  if (!std::filesystem::is_directory(path))
    throw CheckpointError("worker " + std::to_string(workers.worker_rank()) + " cannot see checkpoint " + path +
                          " that worker 0 resumes from: checkpoint.dir must be shared by all workers");
  return path;
}

// A synchronous worker's run, alone or one of a group. The constructor
// resolves the job config into each part's settings and builds everything
// that can fail on bad input, before the first step; run() resumes, steps to
// the end with the reports, evaluations and checkpoints due on the way, and
// finishes. Only the lead worker reports; the others would print the same.
class SyncTrainer {
 public:
  SyncTrainer(const JobConfig& config, const TrainOptions& options, const OpenedDevice& opened);
  TrainSummary run();

 private:
  // Where this job's tensors are counted: its device's memory (MemoryTracker::of).
  MemoryTracker& memory() const { return MemoryTracker::of(model_->store().device()); }
  // The newest complete checkpoint's step, after loading it; nullopt when there is none.
  std::optional<int64_t> resume();
  void print_setup() const;
  // Steps from `step` to last_step_; returns the step reached.
  int64_t train_steps(int64_t step, Clock::time_point run_start);
  // `ranks`: the per-rank fields (gather_ranks), added to the record.
  void log_step(int64_t step, const StepResult& r, const StepTiming& timing, Clock::time_point run_start,
                const nlohmann::json& ranks);
  // A step of training.skip_steps: its batch read, nothing else done.
  StepResult skipped_step(int64_t step) const;
  void note_skipped(int64_t step, const StepResult& r);
  // Every worker's interval (rank_telemetry.hpp), gathered: on the lead, the
  // fields its step record gets, after a warning for each new straggler.
  nlohmann::json gather_ranks(int64_t step);
  // Whether any worker was asked to stop (SIGTERM, SIGUSR1): all agree at
  // the end of the same step. Records the signal in the summary.
  bool stop_agreed(int64_t step);
  void evaluate_at(int64_t step);
  void save(int64_t step, bool last);
  void report_checkpoint(const std::string& path);
  void finish(int64_t step, const MemoryPrediction& predicted, Clock::time_point run_start);
  // Every stage's memory peaks and last step's actions, gathered by the
  // lead: the trace file (metrics.trace) and the per-stage memory lines.
  void gather_pipeline_report();

  // The lead's lock of training.out_dir; first, so it is taken before
  // anything below writes there and released after all of it.
  const std::optional<RunDirLock> run_dir_lock_;
  // The whole job: the cadences this loop keeps and what it reports. Each
  // part below gets its own settings from it.
  const JobConfig& config_;
  const TrainOptions& options_;
  const CheckpointSettings checkpoints_;
  parallel::ParallelContext workers_;
  std::unique_ptr<Model> model_;
  std::optional<DataLoader> loader_;
  StepSettings step_;
  StepMachinery machinery_;
  std::optional<MoeBalancing> moe_;  // the MoE layers' balancing and routing report
  const ThroughputUnit unit_;
  const double peak_tflops_;  // one device's, for mfu (training_device.hpp); 0: no mfu
  const size_t predicted_activations_;  // the formula's bytes (memory_budget.hpp); 0: not predicted
  const bool lead_;
  std::FILE* out_;  // the lead's report stream; null on the others
  int64_t last_step_ = 0;
  TrainSummary summary_;
  std::optional<MetricsLog> metrics_;  // the lead's
  std::optional<Progress> progress_;
  std::optional<StepReporter> reporter_;  // the summary, throughput, step records and heartbeat
  std::optional<CheckpointSaver> saver_;
  UpdateGuard guard_;           // steps whose update is left out (update_guard.hpp)
  int64_t skipped_steps_ = 0;   // so far in the run, resumed ones included
  IntervalTimer interval_;      // this worker's step times since the last log line
  StragglerWatch stragglers_;   // the lead's
  Batch batch_, eval_batch_;
  std::string pipeline_memory_;  // the lead's per-stage memory lines (pipeline jobs)
  std::unique_ptr<PrometheusEndpoint> prometheus_;  // the lead's /metrics and /healthz (metrics.prometheus_port)
};

SyncTrainer::SyncTrainer(const JobConfig& config, const TrainOptions& options, const OpenedDevice& opened)
    : run_dir_lock_(lock_run_dir(config.training)),
      config_(config),
      options_(options),
      checkpoints_(check_writable(to_checkpoint_settings(config))),
      workers_(to_context_settings(config.parallel, opened.device),
               [shared = shared_settings(config)](comm::ProcessGroup& all) { check_ranks_agree(shared, all); }),
      model_(make_model(config.model, model_layout(config.parallel, workers_.tensor_group(), workers_.pipeline_rank(),
                                                   workers_.expert_group(), &config.training,
                                                   check_device_job(opened.device, config)))),
      unit_(throughput_unit(config.data.kind, config.model.block_size)),
      peak_tflops_(device_peak_tflops(opened, config.training)),
      predicted_activations_(predict_activations(config.model, config.parallel, config.training)),
      lead_(workers_.is_lead()),
      out_(lead_ ? options.out : nullptr),
      guard_(config.training.skip_steps, config.training.spike_sigma, config.training.spike_window) {
  if (lead_)  // a port in use fails here
    prometheus_ = open_prometheus_endpoint(config.metrics, config.parallel.heartbeat_timeout_s, workers_.worker_rank());
  use_cores(config.training.threads, workers_.local_size());
  if (config.training.check_replicas_every > 0 && config.parallel.zero_stage >= 3)
    throw ConfigError("training.check_replicas_every: ZeRO-3 keeps no replicas of the parameters to compare "
                      "(parallel.zero_stage = 3)");
  loader_.emplace(job_data_loader(config, workers_.data_rank(), workers_.data_size()));
  step_ = to_step_settings(config, workers_.data_size());
  check_memory_budget(config.training.max_memory_mb, step_, model_->store(), workers_.data_size());
  Rng init_rng(static_cast<uint64_t>(config.training.seed));
  model_->init_parameters(init_rng);
  machinery_ = make_step_machinery(step_, config.parallel, *model_, workers_);
  moe_.emplace(*model_, workers_);
}

TrainSummary SyncTrainer::run() {
  const std::optional<int64_t> resumed = options_.resume ? resume() : std::nullopt;
  if (!resumed && !config_.model.init_from.empty()) {
    const std::string source = init_parameters_from(config_.model, *model_, machinery_.zero.get());
    if (out_) std::fprintf(out_, "parameters from %s (model.init_from)\n", source.c_str());
  }
  int64_t step = resumed.value_or(0);
  if (prometheus_ && resumed) prometheus_->set_checkpoint_step(*resumed);
  const int64_t steps = config_.training.steps;
  last_step_ = options_.stop_at_step > 0 ? std::min(options_.stop_at_step, steps) : steps;
  summary_ = {.first_step = step, .last_step = step};
  if (step >= last_step_) {
    if (out_) std::fprintf(out_, "already finished: step %lld of %lld\n", (long long)step, (long long)last_step_);
    return summary_;
  }
  if (out_) print_setup();
  // Setup made the whole model once on every worker; from here on the
  // peaks are the training's.
  MemoryTracker::global().reset_peaks();
  memory().reset_peaks();
  MemoryPrediction predicted =
      predict_memory(model_->store(), workers_.data_size(), step_.zero_stage, optimizer_state_floats(step_.optimizer),
                     step_.micro_batches);
  predicted.activations = predicted_activations_;
  if (lead_)
    metrics_.emplace(config_.metrics_path(), step, workers_.worker_rank(),
                     tensorboard::open_trainer_tensorboard(config_.tensorboard_dir(), step, config_.metrics.tensorboard));
  progress_.emplace(out_ ? out_ : options_.out, options_.interactive && lead_);
  reporter_.emplace(unit_, summary_, metrics_ ? &*metrics_ : nullptr, prometheus_.get());
  // Every worker writes its part (checkpoint_saver.hpp); the lead reports
  // each checkpoint once it is committed.
  saver_.emplace(checkpoints_, *model_, *machinery_.optimizer, machinery_.zero.get(), workers_);
  const auto run_start = Clock::now();
  step = train_steps(step, run_start);
  if (workers_.pipeline_size() > 1) gather_pipeline_report();
  if (!summary_.stopped_by) evaluate_at(step);  // a preempted job's grace is for its checkpoint
  report_checkpoint(saver_->wait());  // the one in flight, if any
  save(step, true);
  if (lead_) finish(step, predicted, run_start);
  return summary_;
}

std::optional<int64_t> SyncTrainer::resume() {
  const auto latest = agree_on_resume_checkpoint(workers_, checkpoints_.root, out_);
  if (!latest) {
    if (out_) std::fprintf(out_, "no checkpoint in %s: starting from step 0\n", checkpoints_.root.c_str());
    return std::nullopt;
  }
  const TrainState state = load_train_checkpoint(*latest, *model_, machinery_.optimizer.get(), machinery_.zero.get());
  loader_->restore(state.data);
  skipped_steps_ = state.skipped_steps;
  guard_.window().restore(state.spike_window);
  if (out_) std::fprintf(out_, "resuming from step %lld (%s)\n", (long long)state.step, latest->c_str());
  return state.step;
}

void SyncTrainer::print_setup() const {
  // Workers are every process of the mesh; the global batch is the data
  // ways' (a tensor or pipeline group shares one batch). Where every worker
  // is a data way, "N workers" says both.
  const int workers = workers_.workers(), data_ways = workers_.data_size();
  const auto plural = [](int n, const char* one) { return std::to_string(n) + " " + one + (n == 1 ? "" : "s"); };
  const std::string data_ways_text = plural(data_ways, data_ways == workers ? "worker" : "data-parallel way");
  const std::string ways_text =
      data_ways == workers ? data_ways_text : plural(workers, "worker") + ", " + data_ways_text;
  std::fprintf(out_,
               "model %s: %zu parameters | per-device batch %lld, global batch %lld (%s) | "
               "base lr %.4g, scale rule %s (reference batch %lld) -> effective lr %.4g | %s %s | "
               "%d threads, GEMM %s | device %s\n",
               model_->kind().c_str(), model_->store().global_parameter_count(),
               (long long)config_.training.batch_size, (long long)(config_.training.batch_size * data_ways),
               ways_text.c_str(), config_.optimizer.lr,
               enum_string(config_.schedule.scale_rule).c_str(), (long long)reference_batch(config_), step_.base_lr,
               machinery_.optimizer->name().c_str(), enum_string(config_.schedule.decay).c_str(),
               omp_get_max_threads(), kernels::gemm_backend_name(), device_name(model_->store().device()).c_str());
  const bool flash = attention_kernel(config_.model, config_.training) == kernels::AttentionKernel::Flash;
  if (config_.training.precision == Precision::Bf16)
    std::fprintf(out_,
                 "precision: bf16 products with fp32 sums in the linear layers, attention and the output layer (bf16 GEMM: %s; "
                 "attention: %s); fp32 master weights, gradients and optimizer state\n",
                 kernels::gemm_bf16_backend_name(),
                 flash ? "oneDNN on flash blocks" : kernels::attention_bf16_products_name());
  if (peak_tflops_ > 0)
    std::fprintf(out_, "mfu: model FLOPs against %.4g TFLOP/s a device (%s)\n", peak_tflops_,
                 config_.training.peak_tflops > 0 ? "training.peak_tflops" : "the GPU's datasheet, dense");
  if (flash)
    std::fprintf(out_, "attention: flash (blocks with an online softmax: keeps each row's log-sum-exp, not the "
                       "(B, heads, T, T) probabilities)\n");
  if (config_.training.recompute != nn::Recompute::None)
    std::fprintf(out_, "activation recomputation: %s (%s)\n", enum_string(config_.training.recompute).c_str(),
                 config_.training.recompute == nn::Recompute::Full
                     ? "each block keeps its input and output and replays its forward in backward"
                     : "attention's probabilities are recomputed in backward");
  if (const auto* sync = machinery_.sync.get())
    std::fprintf(out_,
                 "data parallel: %s, all-reduce %s over %s, %zu gradient buckets (up to %.3g MiB; the "
                 "first and the last, up to 1 MiB)\n",
                 (data_ways == workers ? data_ways_text : plural(data_ways, "way")).c_str(),
                 enum_string(config_.parallel.all_reduce).c_str(), workers_.transport_name(), sync->buckets().size(),
                 config_.parallel.bucket_mb);
  if (workers_.workers() > 1 && !model_->store().device().is_cpu())
    std::fprintf(out_, "device collectives: %s (%s)\n", workers_.device_collectives().nccl ? "NCCL" : "host-staged",
                 workers_.device_collectives().why.c_str());
  if (workers_.tensor_size() > 1)
    std::fprintf(out_, "tensor parallel: %d ways (%s over %s); %zu of the model's parameters on this worker\n",
                 workers_.tensor_size(), workers_.mesh().describe().c_str(), workers_.transport_name(),
                 model_->store().parameter_count());
  if (workers_.pipeline_size() > 1)
    std::fprintf(out_, "pipeline parallel: %d stages, schedule %s, %lld micro-batches, %lld virtual stage(s) per rank (%s)\n",
                 workers_.pipeline_size(), enum_string(config_.parallel.schedule).c_str(),
                 (long long)config_.parallel.micro_batches, (long long)config_.parallel.virtual_stages,
                 workers_.mesh().describe().c_str());
  if (const nn::MoeConfig& moe = gpt_moe_config(config_.model); moe.enabled())
    std::fprintf(out_, "mixture of experts: %lld experts, top-%lld, every %lld block(s), capacity factor %g%s, "
                 "%d expert-parallel way(s) (%lld experts on this worker)\n",
                 (long long)moe.n_expert, (long long)moe.top_k, (long long)moe.moe_every, moe.capacity_factor,
                 moe.capacity_factor > 0 ? "" : " (dropless)", workers_.expert_size(),
                 (long long)(moe.n_expert / workers_.expert_size()));
  if (const auto* zero = machinery_.zero.get())
    std::fprintf(out_, "ZeRO stage %d: %zu units sharded over %s (%zu of %zu elements on this one)\n",
                 step_.zero_stage, zero->layout().units().size(), data_ways_text.c_str(), zero->layout().local_size(),
                 model_->store().flat_size());
  if (prometheus_)
    std::fprintf(out_, "live metrics: http://%s:%d/metrics and /healthz (metrics.prometheus_port)\n",
                 config_.metrics.prometheus_address.c_str(), prometheus_->port());
}

int64_t SyncTrainer::train_steps(int64_t step, Clock::time_point run_start) {
  const auto& tc = config_.training;
  const StepContext ctx{.model = *model_,
                        .optimizer = *machinery_.optimizer,
                        .gradients = *machinery_.gradients,
                        .workers = workers_,
                        .settings = step_,
                        .micro_batches = *machinery_.micro_batches,
                        .moe = moe_->active() ? &*moe_ : nullptr,
                        .guard = guard_.window().enabled() ? &guard_ : nullptr};
  const int64_t first_step = step;
  const kernels::Backend& device = kernels::backend_for(model_->store().device());  // counts host syncs
  double checkpoint_s = 0;  // the last iteration's save
  while (step < last_step_) {
    const auto t0 = Clock::now();
    comm::flight::set_phase(step + 1, comm::flight::Phase::Data);  // the flight recorder's (why-hung)
    loader_->next_batch(batch_);
    const double data_s = seconds_since(t0);
    const uint64_t sent_before = workers_.bytes_sent();
    const int64_t syncs_before = device.host_syncs();
    const StepResult r = guard_.skips_step(step + 1) ? skipped_step(step) : run_train_step(ctx, batch_, step);
    const int64_t syncs = device.host_syncs() - syncs_before;
    ++step;
    if (r.skipped) note_skipped(step, r);
    if (comm::flight::take_flip_bit(step)) flip_parameter_bit(model_->store());  // a testing knob's corruption
    if (tc.check_replicas_every > 0 && step % tc.check_replicas_every == 0)
      check_replicas(model_->store(), workers_, step);
    StepTiming timing{.comm_bytes = workers_.bytes_sent() - sent_before, .host_syncs = syncs_before < 0 ? -1 : syncs};
    check_memory_peak(tc.max_memory_mb, step, memory());
    timing.step_s = seconds_since(t0);
    timing.per_s = reporter_->step_done(step, r.loss, batch_.batch_size * workers_.data_size(), timing.step_s);
    const bool log_now = step % tc.log_every == 0 || step == last_step_;
    // A checkpoint's time counts in the step after it, logged or not.
    interval_.add_step(timing.step_s + checkpoint_s, data_s, r.comm.time.exposed_s, checkpoint_s);
    const nlohmann::json ranks = log_now && workers_.workers() > 1 ? gather_ranks(step) : nlohmann::json::object();
    if (log_now && lead_) log_step(step, r, timing, run_start, ranks);
    const double elapsed = seconds_since(run_start);
    if (lead_)
      progress_->update({.step = step, .total_steps = tc.steps, .loss = summary_.final_loss, .lr = r.lr,
                         .throughput = reporter_->throughput_ema(), .unit = unit_.unit,
                         .seconds_left = elapsed / (step - first_step) * (last_step_ - step)},
                        log_now);
    if (stop_agreed(step)) break;
    if (tc.eval_every > 0 && step % tc.eval_every == 0 && step != last_step_) evaluate_at(step);
    const auto saving = Clock::now();
    if (checkpoints_.every > 0 && step % checkpoints_.every == 0 && step != last_step_) save(step, false);
    checkpoint_s = seconds_since(saving);
    reporter_->alive(step);  // after the step's evaluation and checkpoint too
  }
  return step;
}

void SyncTrainer::log_step(int64_t step, const StepResult& r, const StepTiming& timing, Clock::time_point run_start,
                           const nlohmann::json& ranks) {
  const int64_t batch_size = config_.training.batch_size;
  nlohmann::json rec = {{"step", step}, {"lr", r.lr}, {"step_ms", timing.step_s * 1e3},
                        {"batch_size", batch_size},
                        {"global_batch", batch_size * workers_.data_size()},
                        {"elapsed_s", seconds_since(run_start)}};
  add_step_fields(rec, r);
  if (skipped_steps_ || guard_.window().enabled()) rec["skipped_steps"] = skipped_steps_;
  rec[unit_.metric] = timing.per_s;
  const double flop_per_s = timing.per_s * model_->flops_per_sample();  // the whole job's model FLOPs
  rec[unit_.flop_metric] = model_->flops_per_sample();                   // per prediction (token or image)
  rec["gflop_per_s"] = flop_per_s / 1e9;
  if (peak_tflops_ > 0) rec["mfu"] = flop_per_s / (peak_tflops_ * 1e12 * workers_.workers());  // over every device
  rec["effective_lr"] = step_.base_lr;  // peak lr after the scaling rule
  if (workers_.workers() > 1) {
    add_layout_fields(rec, workers_.mesh(), step_.zero_stage);
    rec["comm_bytes"] = timing.comm_bytes;  // sent by this worker in the step (loss and norm sums included)
    rec["comm_exposed_ms"] = r.comm.time.exposed_s * 1e3;
  }
  if (machinery_.sync || machinery_.zero) add_overlap_fields(rec, r.comm);
  if (timing.host_syncs >= 0) rec["host_syncs"] = timing.host_syncs;
  add_memory_peaks(rec, memory());
  rec.update(ranks);
  reporter_->record(rec);
}

void SyncTrainer::evaluate_at(int64_t step) {
  comm::flight::set_phase(step, comm::flight::Phase::Evaluation);
  GradientReduction& gradients = *machinery_.gradients;
  gradients.begin_evaluation();
  EvalResult r = evaluate(*machinery_.micro_batches, *loader_, config_.training.eval_batches, eval_batch_);
  gradients.end_evaluation();
  if (workers_.data_size() > 1) {
    double sums[3] = {r.loss_sum, double(r.correct), double(r.predictions)};
    workers_.data_sum(sums);
    r = combine_eval_sums(sums[0], sums[1], sums[2], r.batches);
  }
  summary_.val_loss = r.loss;
  summary_.val_accuracy = r.accuracy;
  if (!lead_) return;
  metrics_->write({{"step", step}, {"val_loss", r.loss}, {"val_accuracy", r.accuracy}, {"val_batches", r.batches}});
  char line[160];
  std::snprintf(line, sizeof line, "step %lld: val_loss %.4f val_accuracy %.4f (%lld batches)", (long long)step,
                r.loss, r.accuracy, (long long)r.batches);
  progress_->message(line);
}

StepResult SyncTrainer::skipped_step(int64_t step) const {
  StepResult r;
  r.loss = r.grad_norm = std::numeric_limits<float>::quiet_NaN();  // not computed
  r.lr = scheduled_lr(step_.schedule, step_.base_lr, step);
  r.skipped = "skip_steps";
  return r;
}

void SyncTrainer::note_skipped(int64_t step, const StepResult& r) {
  ++skipped_steps_;
  if (!lead_ || std::strcmp(r.skipped, "spike") != 0) return;
  char line[160];
  std::snprintf(line, sizeof line, "step %lld: update skipped: loss %.4f, gradient norm %.4g is a spike "
                "(training.spike_sigma)", (long long)step, r.loss, r.grad_norm);
  progress_->message(line);
}

nlohmann::json SyncTrainer::gather_ranks(int64_t step) {
  const RankInterval mine = interval_.take(double(memory().peak_total()) / (1 << 20));
  const std::vector<std::vector<double>> all = workers_.all_gather_workers(mine.encode());
  nlohmann::json fields = nlohmann::json::object();
  if (!lead_) return fields;
  std::vector<RankInterval> ranks;
  for (const auto& v : all) ranks.push_back(RankInterval::decode(v));
  const StragglerReport report = stragglers_.assess(ranks);
  add_rank_fields(fields, ranks, report);
  for (int r : report.new_stragglers) {
    char line[200];
    std::snprintf(line, sizeof line, "step %lld: worker %d is a straggler: busy %.1f ms per step, %.2fx the fastest "
                  "worker's (%.2fx its own best)", (long long)step, r, report.window_busy_ms[size_t(r)],
                  report.window_vs_fastest[size_t(r)], report.vs_best[size_t(r)]);
    progress_->message(line);
  }
  return fields;
}

bool SyncTrainer::stop_agreed(int64_t step) {
  const int64_t sig = workers_.workers() > 1 ? workers_.max_over_workers(stop_signal()) : stop_signal();
  if (sig == 0 || step == last_step_) return false;  // the last step ends the run anyway
  summary_.stopped_by = static_cast<int>(sig);
  if (lead_)
    progress_->message("step " + std::to_string(step) + ": stopping on " + signal_name(summary_.stopped_by) +
                       " (preemption): writing a checkpoint of this step");
  return true;
}

void SyncTrainer::save(int64_t step, bool last) {
  comm::flight::set_phase(step, comm::flight::Phase::Checkpoint);
  TrainState state{.step = step, .data = loader_->state(), .skipped_steps = skipped_steps_,
                   .spike_window = guard_.window().serialize()};
  report_checkpoint(saver_->save(state, last));
}

void SyncTrainer::report_checkpoint(const std::string& path) {
  if (lead_ && !path.empty()) progress_->message("checkpoint " + path);
  if (prometheus_ && !path.empty()) prometheus_->checkpoint_committed(path);
}

void SyncTrainer::gather_pipeline_report() {
  const parallel::pipeline::PipelineExecutor& executor = *machinery_.micro_batches->pipeline();
  const auto& tracker = memory();
  // [activations MiB, total MiB, activation slots], then the spans.
  std::vector<double> mine{double(tracker.peak(MemoryKind::Activations)) / (1 << 20),
                           double(tracker.peak_total()) / (1 << 20), double(executor.peak_slots())};
  if (!config_.metrics.trace.empty()) {
    const std::vector<double> spans = encode_spans(executor);
    mine.insert(mine.end(), spans.begin(), spans.end());
  }
  std::vector<std::vector<double>> all = workers_.all_gather_workers(mine);
  if (!lead_) return;
  nlohmann::json stages = nlohmann::json::array();
  pipeline_memory_ = "pipeline stages (peak per worker): activations, total, micro-batches held at once\n";
  for (size_t r = 0; r < all.size(); ++r) {
    const comm::MeshCoord at = workers_.mesh().coord(static_cast<int>(r));
    stages.push_back({{"worker", r}, {"stage", at.pp}, {"peak_activations_mb", all[r][0]},
                      {"peak_total_mb", all[r][1]}, {"activation_slots", all[r][2]}});
    char line[160];
    std::snprintf(line, sizeof line, "  worker %zu (stage %d, dp %d, tp %d): %10.2f MiB %10.2f MiB %4.0f\n", r, at.pp,
                  at.dp, at.tp, all[r][0], all[r][1], all[r][2]);
    pipeline_memory_ += line;
    all[r].erase(all[r].begin(), all[r].begin() + 3);
  }
  metrics_->write({{"step", summary_.last_step}, {"pipeline_stages", stages}});
  if (config_.metrics.trace.empty()) return;
  std::ofstream f(config_.metrics.trace);
  f << pipeline_trace_json(all, workers_.mesh(), static_cast<int>(config_.parallel.virtual_stages));
  if (!f) throw IoError("metrics.trace: cannot write '" + config_.metrics.trace + "'");
  progress_->message("pipeline trace of step " + std::to_string(summary_.last_step) + ": " + config_.metrics.trace);
}

void SyncTrainer::finish(int64_t step, const MemoryPrediction& predicted, Clock::time_point run_start) {
  progress_->finish();
  nlohmann::json peaks = {{"step", step}, {"memory", "peak"}};
  add_memory_peaks(peaks, memory());
  if (predicted.activations) peaks["predicted_activations_mb"] = double(predicted.activations) / (1 << 20);
  metrics_->write(peaks);
  if (options_.memory_report) {
    std::fputs(memory_report(predicted, workers_.data_size(), step_.zero_stage, model_->store().device()).c_str(), out_);
    std::fputs(pipeline_memory_.c_str(), out_);
  }
  if (summary_.stopped_by) {
    std::fprintf(out_, "preempted (%s): %lld steps in %s, final loss %.4f; the checkpoint of step %lld is written: "
                 "--resume goes on from it (exit status %d)\n", signal_name(summary_.stopped_by),
                 (long long)(step - summary_.first_step), format_duration(seconds_since(run_start)).c_str(),
                 summary_.final_loss, (long long)step, kExitPreempted);
    return;
  }
  std::fprintf(out_, "done: %lld steps in %s, final loss %.4f, val_loss %.4f\n",
               (long long)(step - summary_.first_step), format_duration(seconds_since(run_start)).c_str(),
               summary_.final_loss, summary_.val_loss);
}

}  // namespace

TrainSummary train_synchronous(const JobConfig& config, const TrainOptions& options, const OpenedDevice& opened) {
  // Every worker's ring of its collectives, <out_dir>/flight/ (`meshtrain why-hung`).
  comm::flight::open_worker_ring(config.training.out_dir);
  watch_stop_signals();  // before the workers' threads start: they inherit the blocked signals
  return SyncTrainer(config, options, opened).run();
}

}  // namespace meshtrain
