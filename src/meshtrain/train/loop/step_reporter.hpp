#pragma once
// What every training loop does with a step it finished, the synchronous
// trainer's (trainer.cpp) and a parameter-server worker's (ps/ps_worker.cpp)
// alike, so both report their steps the same way:
//   - the run's summary: the step reached and the last finite loss (a step
//     of training.skip_steps computes none, and a non-finite loss never
//     becomes the run's final one);
//   - the throughput: predictions (tokens or samples, throughput.hpp) per
//     second of the step, and its moving average for the progress line;
//   - the metrics record, to metrics.jsonl and the same numbers on /metrics;
//   - the signs of life: the supervisor's heartbeat and /healthz's progress.
// The loops decide what a record holds and when each of these happens.
#include <cstdint>

#include <nlohmann/json.hpp>

#include "meshtrain/train/loop/heartbeat.hpp"
#include "meshtrain/train/loop/train_options.hpp"
#include "meshtrain/train/report/metrics_log.hpp"
#include "meshtrain/train/report/prometheus_endpoint.hpp"
#include "meshtrain/train/report/throughput.hpp"

namespace meshtrain {

class StepReporter {
 public:
  // `summary` gets each step's; `metrics` is null on a worker that keeps no
  // metrics file, `prometheus` where there is no endpoint. All three outlive
  // this reporter.
  StepReporter(ThroughputUnit unit, TrainSummary& summary, MetricsLog* metrics, PrometheusEndpoint* prometheus);
  StepReporter(const StepReporter&) = delete;
  StepReporter& operator=(const StepReporter&) = delete;

  // Step `step` ended with `loss` after `step_s` seconds over `samples`
  // samples (the global batch's): returns its throughput, folded into
  // throughput_ema() (weight 0.1; the run's first step starts it).
  double step_done(int64_t step, double loss, int64_t samples, double step_s);
  double throughput_ema() const { return throughput_ema_; }
  const ThroughputUnit& unit() const { return unit_; }

  // The step's record, to metrics.jsonl and /metrics.
  void record(const nlohmann::json& rec);
  // After everything the step does (its evaluation and checkpoint too).
  void alive(int64_t step);

 private:
  const ThroughputUnit unit_;
  TrainSummary& summary_;
  MetricsLog* const metrics_;
  PrometheusEndpoint* const prometheus_;
  Heartbeat heartbeat_;  // for the supervisor (parallel.heartbeat_timeout_s)
  bool first_step_ = true;
  double throughput_ema_ = 0;
};

}  // namespace meshtrain
