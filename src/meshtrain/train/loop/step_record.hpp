#pragma once
// The parts of a synchronous step's metrics record (metrics.jsonl, and from
// it TensorBoard and /metrics) that come from the step and the job rather
// than from the loop: the step's result, the job's layout, the gradient
// all-reduce's overlap, the memory peaks. The trainer assembles the record.
#include <cstdint>

#include <nlohmann/json.hpp>

#include "meshtrain/comm/mesh/device_mesh.hpp"
#include "meshtrain/core/memory.hpp"
#include "meshtrain/train/engine/train_step.hpp"

namespace meshtrain {

// How one step went, beside its StepResult: its wall time, throughput and
// bytes sent.
struct StepTiming {
  double step_s = 0;
  double per_s = 0;         // tokens or samples of the global batch per second
  uint64_t comm_bytes = 0;  // sent by this worker during the step
  int64_t host_syncs = -1;  // the device's waits for the host in the step (kernels::Backend::host_syncs); -1: uncounted
};

// loss and grad_norm (not for a step of training.skip_steps, which computes
// neither), why the update was skipped, and the MoE layers' routing:
// the totals beside the loss, and per layer the load of each expert.
void add_step_fields(nlohmann::json& record, const StepResult& r);
// The job's shape: workers and the ways of each axis, the ZeRO stage.
void add_layout_fields(nlohmann::json& record, const comm::DeviceMesh& mesh, int zero_stage);
// The gradient exchange's busy time (data parallelism's all-reduce; ZeRO's gathers and
// reduce-scatters) and the share of it hidden behind compute; ZeRO-3's gathers on demand.
void add_overlap_fields(nlohmann::json& record, const StepCommunication& comm);
// Peak tracked bytes of each kind so far in `tracker` (the job's device's,
// MemoryTracker::of), in MiB, as peak_<kind>_mb; off the host also the
// host's total, peak_host_total_mb.
void add_memory_peaks(nlohmann::json& record, const MemoryTracker& tracker);

}  // namespace meshtrain
