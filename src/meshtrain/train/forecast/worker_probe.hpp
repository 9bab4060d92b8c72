#pragma once
// plan --config's probe of one worker (job_forecast.hpp): the job's model
// as a worker builds it, timed for a few steps on the job's device, alone
// and, on the CPU, beside the other workers' copies.
#include <memory>

#include "meshtrain/core/device.hpp"
#include "meshtrain/nn/model.hpp"
#include "meshtrain/parallel/expert/mirrored_expert_group.hpp"
#include "meshtrain/parallel/tensor/solo_tensor_group.hpp"
#include "meshtrain/train/config/job_config.hpp"

namespace meshtrain {

// Medians over the timed steps.
struct StepTimes {
  double forward_backward_s = 0, update_s = 0;
  double forward_s = 0;  // of forward_backward_s, the forwards
};

// The stand-ins a probe model's collectives talk to (they have no peers here).
struct ProbeGroups {
  std::unique_ptr<parallel::SoloTensorGroup> tp;
  std::unique_ptr<parallel::MirroredExpertGroup> ep;
};

// Worker `worker`'s model on `device`: with tensor parallelism its tensor
// rank's shards, with expert parallelism its expert rank's experts,
// computing the busiest expert rank's rows (mirrored_expert_group.hpp); the
// probe times compute, the collectives are costed by the link model. Its
// layers compute as the job's will (training.recompute, precision and
// attention).
std::unique_ptr<Model> make_initialized_model(const JobConfig& config, int worker, ProbeGroups& groups,
                                              const Device& device);

struct Probe {
  StepTimes alone;      // one worker with the machine to itself
  StepTimes contended;  // the slowest of `workers` running at once
  size_t activations = 0, data = 0;
};

// Worker 0 alone first, on `model` (its activations and batch data are
// tracked then, in its device's memory), then all workers at once, one
// thread each with its own model: workers on one host share caches and
// memory bandwidth, and the step waits for the slowest. Workers on a
// device have one each: nothing to contend for, so one runs.
Probe run_probe(const JobConfig& config, Model& model, int workers, int threads, int steps);

}  // namespace meshtrain
