#include "meshtrain/train/loop/step_reporter.hpp"

#include <cmath>

namespace meshtrain {

StepReporter::StepReporter(ThroughputUnit unit, TrainSummary& summary, MetricsLog* metrics,
                           PrometheusEndpoint* prometheus)
    : unit_(unit), summary_(summary), metrics_(metrics), prometheus_(prometheus) {}

double StepReporter::step_done(int64_t step, double loss, int64_t samples, double step_s) {
  const double per_s = static_cast<double>(samples * unit_.per_sample) / step_s;
  throughput_ema_ = first_step_ ? per_s : 0.9 * throughput_ema_ + 0.1 * per_s;
  first_step_ = false;
  if (std::isfinite(loss)) summary_.final_loss = loss;
  summary_.last_step = step;
  return per_s;
}

void StepReporter::record(const nlohmann::json& rec) {
  if (metrics_) metrics_->write(rec);
  if (prometheus_) prometheus_->update(rec);  // the same numbers on /metrics
}

void StepReporter::alive(int64_t step) {
  heartbeat_.beat();
  if (prometheus_) prometheus_->progress(step);
}

}  // namespace meshtrain
