#include "meshtrain/plan/plan_input.hpp"

#include <string>

#include "meshtrain/core/error.hpp"

namespace meshtrain::plan {
namespace {

void require(bool ok, const std::string& message) {
  if (!ok) throw ConfigError(message);
}

}  // namespace

void PlanInput::validate() const {
  model.validate();
  require(global_batch > 0, "training.global_batch: the global batch must be positive (got " + std::to_string(global_batch) + ")");
  require(micro_batch >= 0, "training.micro_batch: must not be negative (got " + std::to_string(micro_batch) + ")");
  require(micro_batch <= global_batch, "training.micro_batch: a micro-batch of " + std::to_string(micro_batch) +
                                           " is larger than the global batch of " + std::to_string(global_batch));
  require(cluster.devices_per_node > 0,
          "hardware.devices_per_node: needs at least one device (got " + std::to_string(cluster.devices_per_node) + ")");
  require(cluster.nodes > 0, "hardware.nodes: needs at least one node (got " + std::to_string(cluster.nodes) + ")");
  require(global_batch >= cluster.devices(), "training.global_batch: a global batch of " + std::to_string(global_batch) +
                                                 " cannot give each of the " + std::to_string(cluster.devices()) +
                                                 " devices a sample");
  require(cluster.device.memory_bytes > 0, "hardware.memory_gb: device memory must be positive");
  require(peak_flops() > 0, "hardware.tflops: the device's FLOP/s must be positive");
  require(cluster.intra.bandwidth_Bps > 0 && cluster.inter.bandwidth_Bps > 0,
          "hardware.intra_gb_per_s, hardware.inter_gb_per_s: link bandwidths must be positive");
  require(cluster.intra.latency_s >= 0 && cluster.inter.latency_s >= 0, "hardware.intra_latency_us, hardware.inter_latency_us: latencies must not be negative");
  require(cluster.reducers >= 0, "hardware.reducers: must not be negative (0: as many as needed)");
  require(cluster.reducer_bandwidth_Bps >= 0, "hardware.reducer_gb_per_s: must not be negative");
  require(mfu > 0 && mfu <= 1, "training.mfu: must be in (0, 1] (got " + std::to_string(mfu) + ")");
  require(usable_memory > 0 && usable_memory <= 1, "hardware.usable_memory: must be in (0, 1]");
  require(overlap >= 0 && overlap <= 1, "training.overlap: must be in [0, 1]");
  require(single_device_days >= 0, "time.single_device_days: must not be negative");
  require(tokens >= 0, "time.tokens: must not be negative");
  require(target_days >= 0, "time.target_days: must not be negative");
  require(base_lr >= 0 && reference_batch >= 0 && samples_per_epoch >= 0,
          "training.base_lr, training.reference_batch, training.samples_per_epoch: must not be negative");
}

double PlanInput::param_bytes() const { return mixed_precision() ? 2 : 4; }
double PlanInput::grad_bytes() const { return mixed_precision() ? 2 : 4; }

double PlanInput::optimizer_bytes() const {
  // Mixed precision keeps an fp32 master copy (4) beside fp32 state.
  const double master = mixed_precision() ? 4 : 0;
  switch (optimizer) {
    case PlanOptimizer::Sgd: return master;
    case PlanOptimizer::Momentum: return master + 4;
    case PlanOptimizer::Adam: return master + 8;
  }
  return master;
}

double PlanInput::activation_bytes() const { return mixed_precision() ? 2 : 4; }

double PlanInput::peak_flops() const {
  return mixed_precision() ? cluster.device.peak_flops_16bit : cluster.device.peak_flops_fp32;
}

}  // namespace meshtrain::plan
