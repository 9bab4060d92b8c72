#include "meshtrain/train/forecast/pipeline_forecast.hpp"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <thread>
#include <vector>

#include "meshtrain/core/error.hpp"
#include "meshtrain/core/stopwatch.hpp"
#include "meshtrain/core/memory.hpp"
#include "meshtrain/core/statistics.hpp"
#include "meshtrain/core/threads.hpp"
#include "meshtrain/data/loader.hpp"
#include "meshtrain/kernels/backend.hpp"
#include "meshtrain/nn/gpt.hpp"
#include "meshtrain/optim/factory.hpp"
#include "meshtrain/parallel/expert/mirrored_expert_group.hpp"
#include "meshtrain/parallel/pipeline/executor.hpp"
#include "meshtrain/parallel/pipeline/validator.hpp"
#include "meshtrain/parallel/tensor/solo_tensor_group.hpp"
#include "meshtrain/train/config/section_configs.hpp"
#include "meshtrain/train/engine/model_factory.hpp"
#include "meshtrain/train/engine/train_step.hpp"

namespace meshtrain {
namespace {

namespace pp = parallel::pipeline;
using Clock = std::chrono::steady_clock;

// One stage's model on the job's device with what its probe runs on: a
// micro-batch of the job's data, (for the update) its optimizer, and the
// values a neighbour stage would send (uploaded into the stage's buffers).
struct StageRig {
  kernels::Backend* backend = nullptr;  // the device's: where the model's tensors are
  std::unique_ptr<parallel::SoloTensorGroup> tp;
  std::unique_ptr<parallel::MirroredExpertGroup> ep;  // the busiest expert rank's rows (job_forecast.hpp)
  std::unique_ptr<Model> model;
  Gpt* gpt = nullptr;
  std::unique_ptr<Optimizer> optimizer;
  Batch batch, micro;
  bool split = false;  // the schedule splits backward (zero_bubble)
  std::vector<float> sent_activation, sent_gradient;  // host values, one piece's input or output gradient
};

StageRig make_rig(const JobConfig& config, int stage, int tensor_rank, int data_ways, const Device& device) {
  const ParallelSection& p = config.parallel;
  StageRig rig;
  rig.backend = &kernels::backend_for(device);
  if (p.tensor > 1)
    rig.tp = std::make_unique<parallel::SoloTensorGroup>(tensor_rank, int(p.tensor), p.sequence_parallel, rig.backend);
  if (p.expert > 1 && config.model.n_expert > 1)
    rig.ep = std::make_unique<parallel::MirroredExpertGroup>(0, int(p.expert), rig.backend);
  rig.model = make_model(config.model, model_layout(p, rig.tp.get(), stage, rig.ep.get(), &config.training, device));
  Rng rng(static_cast<uint64_t>(config.training.seed));
  rig.model->init_parameters(rng);
  rig.gpt = dynamic_cast<Gpt*>(rig.model.get());
  if (!rig.gpt) throw ConfigError("plan --config: pipeline stages split a GPT");
  rig.optimizer = make_optimizer(to_optimizer_config(config.optimizer), rig.model->store());
  DataLoader loader = job_data_loader(config, 0, data_ways);
  loader.next_batch(rig.batch);
  copy_samples(rig.batch, 0, rig.batch.batch_size / p.micro_batches, rig.micro);
  rig.split = p.schedule == pp::ScheduleKind::ZeroBubble;
  const int64_t n = rig.gpt->activation_floats(rig.micro.batch_size, rig.micro.seq_len);
  for (int64_t i = 0; i < n; ++i) {
    rig.sent_activation.push_back(0.5f * std::sin(0.37f * float(i % 1000)));
    rig.sent_gradient.push_back(1e-3f * std::cos(0.11f * float(i % 1000)));
  }
  return rig;
}

struct SlotTimes {
  double forward = 0, backward = 0, weight = 0;  // all of the rank's pieces
};

// What a probe's pieces are timed by: the steady clock, or (more workers
// than cores, one thread each) the thread's CPU time. There a piece lasts
// about one scheduler time slice, so wall time counted it either once or
// twice as long, by where the slice ended (dp2 x pp2 forecast 21-25 or
// 43-51 ms against 37-41 run); CPU time holds what sharing caches costs
// and leaves the waiting for a core to the work bound (probe_pipeline).
struct ProbeClock {
  bool cpu = false;
  double now() const {
    return cpu ? thread_cpu_seconds() : std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
  }
};

// Forward of every piece on `slot`, then their backwards (in reverse), with
// synthetic activations and gradients where a neighbour would send them.
// Off the CPU the host waits for the device's queue before each reading of
// the clock: the kernels run behind the calls that queue them.
SlotTimes run_slot(StageRig& rig, size_t slot, ProbeClock clock = {}) {
  Gpt& gpt = *rig.gpt;
  const Batch& b = rig.micro;
  DeviceAllocator& memory = rig.backend->allocator();
  const size_t bytes = rig.sent_activation.size() * sizeof(float);
  auto elapsed_since = [&](double t0) {
    rig.backend->finish();
    return clock.now() - t0;
  };
  SlotTimes t;
  double t0 = clock.now();
  for (size_t piece = 0; piece < gpt.pieces(); ++piece) {
    if (!gpt.piece_has_embedding(piece))
      memory.upload(gpt.input_buffer(piece, slot, b.batch_size, b.seq_len), rig.sent_activation.data(), bytes);
    ForwardResult loss;
    gpt.forward_piece(piece, slot, b, &loss);
  }
  t.forward = elapsed_since(t0);
  for (size_t piece = gpt.pieces(); piece-- > 0;) {
    if (!gpt.piece_has_head(piece))
      memory.upload(gpt.output_gradient_buffer(piece, slot, b.batch_size, b.seq_len), rig.sent_gradient.data(), bytes);
    t0 = clock.now();
    gpt.backward_piece(piece, slot, rig.split);
    t.backward += elapsed_since(t0);
    if (rig.split) {
      t0 = clock.now();
      gpt.backward_piece_weights(piece, slot);
      t.weight += elapsed_since(t0);
    }
  }
  return t;
}

// Median times of `steps` runs of slot 0 (after two untimed ones), per
// chunk, and of the norm and update, on `threads` threads of the caller.
StageForecast time_stage(const JobConfig& config, StageRig& rig, int threads, int steps, ProbeClock clock = {}) {
  use_threads(threads);
  std::vector<double> forward, backward, weight, update;
  const double chunks = double(rig.gpt->pieces());
  for (int i = 0; i < 2 + steps; ++i) {
    rig.model->store().zero_grads();
    const SlotTimes t = run_slot(rig, 0, clock);
    const double t0 = clock.now();
    gradient_norm(rig.model->store(), config.optimizer.grad_clip);
    rig.optimizer->step(rig.model->store(), static_cast<float>(config.optimizer.lr * 1e-3));
    rig.backend->finish();
    if (i < 2) continue;
    update.push_back(clock.now() - t0);
    forward.push_back(t.forward / chunks);
    backward.push_back(t.backward / chunks);
    weight.push_back(t.weight / chunks);
  }
  StageForecast s;
  s.forward_s = median(forward);
  s.backward_s = median(backward);
  s.weight_s = median(weight);
  s.update_s = median(update);
  return s;
}

// The schedule's compute with each rank's times, its messages `transfer_s` each.
pp::ScheduleReport simulate(const pp::Schedule& schedule, const std::vector<StageForecast>& stages, double transfer_s) {
  std::vector<pp::ActionCosts> costs;
  for (const StageForecast& s : stages) costs.push_back({s.forward_s, s.backward_s, s.weight_s, transfer_s});
  return pp::validate_schedule(schedule, costs);
}

// Each stage alone, one after another, on `threads` threads: its memory
// (one activation slot, then two; the schedule's slots from those) and its
// times. Its model stays in the probe for the data-parallel terms.
void probe_stages_alone(const JobConfig& config, const pp::Schedule& schedule, int data_ways, int threads, int steps,
                        const Device& device, PipelineProbe& probe) {
  const ParallelSection& p = config.parallel;
  const int k = optimizer_state_floats(to_optimizer_config(config.optimizer));
  const int zero = data_ways > 1 ? int(p.zero_stage) : 0;
  auto& tracker = MemoryTracker::of(device);
  for (int s = 0; s < int(p.pipeline); ++s) {
    // The stages probed before are kept (their models): count from here.
    const size_t held = tracker.current(MemoryKind::Activations), data = tracker.current(MemoryKind::Data);
    tracker.reset_peaks();
    StageRig rig = make_rig(config, s, 0, data_ways, device);
    run_slot(rig, 0);
    const size_t one = tracker.peak(MemoryKind::Activations) - held;
    run_slot(rig, 1);
    const size_t per_slot = tracker.peak(MemoryKind::Activations) - held - one;
    if (s == 0) probe.data = tracker.peak(MemoryKind::Data) - data;
    StageForecast stage = time_stage(config, rig, threads, steps);
    stage.stage = s;
    const std::vector<int> slots = pp::slots_needed(schedule, s);
    stage.slots = *std::max_element(slots.begin(), slots.end());
    stage.activations = one + size_t(std::max(0, stage.slots - 1)) * per_slot;
    stage.parameters = rig.model->store().parameter_count();
    stage.model_state = predict_memory(rig.model->store(), data_ways, zero, k, p.micro_batches);
    probe.stages.push_back(stage);
    probe.models.push_back(std::move(rig.model));
  }
}

// Every worker at once on this host's CPU, one thread each running its
// stage (worker w is stage w / (data x tensor ways), tensor rank w %
// tensor): each worker's times, as `clock` measures them.
std::vector<StageForecast> time_workers_together(const JobConfig& config, int workers, int data_ways, int threads,
                                                 int steps, ProbeClock clock) {
  const int T = int(config.parallel.tensor);
  std::vector<StageForecast> times(static_cast<size_t>(workers));
  std::vector<std::exception_ptr> errors(static_cast<size_t>(workers));
  std::vector<std::thread> running;
  for (int w = 0; w < workers; ++w)
    running.emplace_back([&, w] {
      try {
        StageRig rig = make_rig(config, w / (data_ways * T), w % T, data_ways, Device{});
        times[size_t(w)] = time_stage(config, rig, threads, steps, clock);
      } catch (...) {
        errors[size_t(w)] = std::current_exception();
      }
    });
  for (std::thread& t : running) t.join();
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
  return times;
}

// A stage's times are its slowest worker's.
void take_slowest_workers(std::vector<StageForecast>& stages, const std::vector<StageForecast>& times,
                          int workers_per_stage) {
  for (StageForecast& s : stages) s.forward_s = s.backward_s = s.weight_s = s.update_s = 0;
  for (size_t w = 0; w < times.size(); ++w) {
    StageForecast& s = stages[w / size_t(workers_per_stage)];
    const StageForecast& t = times[w];
    s.forward_s = std::max(s.forward_s, t.forward_s);
    s.backward_s = std::max(s.backward_s, t.backward_s);
    s.weight_s = std::max(s.weight_s, t.weight_s);
    s.update_s = std::max(s.update_s, t.update_s);
  }
}

// More workers' threads than cores: a core runs one at a time, so the step
// takes at least every worker's compute (its pieces' CPU time per
// micro-batch and chunk, V chunks of M micro-batches; its threads' share
// alike) over the cores: a stage in its bubble leaves its core to the
// others, which the schedule's critical path, run as if each rank had a
// core of its own, cannot show. The updates run together at the step's
// end, sharing the cores alike (stages' update_s scaled here). Returns the
// bound in seconds.
double shared_cores_bound(const ParallelSection& p, const std::vector<StageForecast>& times, int threads, int cores,
                          std::vector<StageForecast>& stages) {
  const double per_rank = double(p.micro_batches * p.virtual_stages);
  double work = 0;
  for (const StageForecast& t : times) work += double(threads) * per_rank * (t.forward_s + t.backward_s + t.weight_s);
  for (StageForecast& s : stages) s.update_s *= double(times.size()) * double(threads) / double(cores);
  return work / double(cores);
}

}  // namespace

PipelineProbe probe_pipeline(const JobConfig& config, int workers, int data_ways, int threads, int steps,
                             double transfer_s, const Device& device) {
  const ParallelSection& p = config.parallel;
  const pp::Schedule schedule =
      pp::make_schedule(p.schedule, int(p.pipeline), int(p.micro_batches), int(p.virtual_stages));
  const int saved_threads = omp_get_max_threads();
  PipelineProbe probe;
  probe_stages_alone(config, schedule, data_ways, threads, steps, device, probe);
  probe.alone_compute_s = simulate(schedule, probe.stages, 0.0).makespan;
  double work_bound = 0;
  if (workers > 1 && device.is_cpu()) {  // on devices each worker has its own: nothing to share
    const int cores = this_host_cpu().cores;
    const ProbeClock clock{workers * threads > cores};
    const std::vector<StageForecast> times = time_workers_together(config, workers, data_ways, threads, steps, clock);
    take_slowest_workers(probe.stages, times, data_ways * int(p.tensor));
    if (clock.cpu) work_bound = shared_cores_bound(p, times, threads, cores, probe.stages);
  }
  const pp::ScheduleReport together = simulate(schedule, probe.stages, 0.0);
  probe.compute_s = std::max(together.makespan, work_bound);
  probe.bubble = together.bubble;
  probe.exposed_sends_s = transfer_s > 0 ? simulate(schedule, probe.stages, transfer_s).makespan - together.makespan : 0;
  use_threads(saved_threads);
  return probe;
}

}  // namespace meshtrain
