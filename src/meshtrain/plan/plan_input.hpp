#pragma once
// Everything a plan is computed from: the model, the numbers it trains in,
// the batch, the hardware, and how much training there is to do.
#include <cstdint>
#include <string>

#include "meshtrain/plan/hardware.hpp"
#include "meshtrain/plan/model_shape.hpp"

namespace meshtrain::plan {

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
  // "fp32", or "bf16" / "fp16": mixed precision with fp32 master weights.
  std::string precision = "bf16";
  // "sgd", "momentum" (also lars), "adam" (also adamw, lamb).
  std::string optimizer = "adam";
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
  double usable_bytes() const { return cluster.device.memory_bytes * usable_memory; }
};

}  // namespace meshtrain::plan
