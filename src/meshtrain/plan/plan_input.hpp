#pragma once
// Everything a plan is computed from: the model, the numbers it trains in,
// the batch, the hardware, and how much training there is to do.
#include <cstdint>
#include <span>

#include "meshtrain/core/enum_names.hpp"
#include "meshtrain/plan/hardware.hpp"
#include "meshtrain/plan/model_shape.hpp"

namespace meshtrain::plan {

// training.precision: fp32, or mixed precision (16-bit parameters,
// gradients and activations beside fp32 master weights) in bf16 or fp16.
// Not core/precision.hpp's Precision: the runtime has no fp16, and its bf16
// keeps fp32 parameters and gradients (plan_job_config.cpp maps the two).
enum class PlanPrecision { Fp32, Bf16, Fp16 };
inline constexpr EnumName<PlanPrecision> kPlanPrecisionNames[] = {
    {PlanPrecision::Fp32, "fp32"}, {PlanPrecision::Bf16, "bf16"}, {PlanPrecision::Fp16, "fp16"}};
constexpr std::span<const EnumName<PlanPrecision>> enum_names(PlanPrecision) { return kPlanPrecisionNames; }

// training.optimizer by the state it keeps per parameter: none (sgd), one
// buffer (momentum; lars alike), two (adam; adamw and lamb alike).
enum class PlanOptimizer { Sgd, Momentum, Adam };
inline constexpr EnumName<PlanOptimizer> kPlanOptimizerNames[] = {
    {PlanOptimizer::Sgd, "sgd"}, {PlanOptimizer::Momentum, "momentum"}, {PlanOptimizer::Adam, "adam"}};
constexpr std::span<const EnumName<PlanOptimizer>> enum_names(PlanOptimizer) { return kPlanOptimizerNames; }

struct Cluster {
  DeviceProfile device;
  int devices_per_node = 1;
  int nodes = 1;
  LinkProfile intra;  // between the devices of one node
  LinkProfile inter;  // between nodes
  // Reduction Server: reducer nodes and each one's network bandwidth (bytes/s
  // per direction); 0 reducers: as many as the workers' bandwidth needs.
  int reducers = 0;
  double reducer_bandwidth_Bps = 0;  // 0: the inter-node link's
  int devices() const { return devices_per_node * nodes; }
};

struct PlanInput {
  ModelShape model;
  PlanPrecision precision = PlanPrecision::Bf16;
  PlanOptimizer optimizer = PlanOptimizer::Adam;
  int64_t global_batch = 0;  // samples per optimizer step
  int64_t micro_batch = 0;   // samples per device per forward; 0: the largest that fits
  Cluster cluster;
  // Share of the device's peak FLOP/s a training step reaches (MFU); derived
  // instead when both the single-device time and the token budget are given.
  double mfu = 0.4;
  double usable_memory = 0.9;  // share of device memory left for training (allocator, runtime)
  double overlap = 0.8;        // share of the gradient exchange hidden behind backward (bench/overlap.sh)
  double single_device_days = 0;  // time to train on one device; 0: unknown
  double tokens = 0;              // token budget (samples x tokens per sample); 0: unknown
  double target_days = 0;         // wanted time to train; 0: none
  bool preemptible = false;       // workers may be taken away (Spot VMs)
  bool sparse = false;            // sparse model (embeddings that dominate, sparse updates)
  // The large-batch rule: a learning rate tuned at reference_batch, and the
  // dataset size for warmup in epochs (all optional).
  double base_lr = 0;
  int64_t reference_batch = 0;
  double samples_per_epoch = 0;

  // Throws ConfigError naming the problem (and the field).
  void validate() const;

  double param_bytes() const;      // per parameter: 2 in mixed precision, 4 in fp32
  double grad_bytes() const;       // the same
  double optimizer_bytes() const;  // K: 12 for mixed-precision Adam (fp32 master, m, v), 8 for fp32 Adam...
  double activation_bytes() const; // per activation element
  double peak_flops() const;       // the device's, for this precision
  bool mixed_precision() const { return precision != PlanPrecision::Fp32; }
  double usable_bytes() const { return cluster.device.memory_bytes * usable_memory; }
};

}  // namespace meshtrain::plan
