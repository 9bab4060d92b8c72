#pragma once
// `meshtrain plan --config JOB.toml`: a runnable job's per-rank peak memory
// and step time on this machine, before it runs, on the job's device
// (training.device): off the CPU the probe below runs there, its
// activations are the device's memory and its times wait for the device.
//
// Memory: parameters, gradients, optimizer state and communication buffers
// exactly by ZeRO's formulas (memory_budget.hpp); activations and batch data
// measured by a probe, one worker's model on one worker's batch in this
// process for a few steps (they do not depend on the stage or the number of
// workers); asynchronous checkpoint copies of the worker's part.
//
// Step time, per worker with W workers:
//   compute   forward + backward measured by the probe on the worker's
//             threads with W copies running at once (one thread each, as W
//             worker processes share this host's caches and memory
//             bandwidth; the slowest counts, as the step waits for it),
//             plus clipping and the optimizer update (divided by W from
//             ZeRO stage 1 on: each worker updates its shard)
//   comm      the alpha-beta time (comm/collectives/cost_model.hpp, with
//             this machine's measured shared-memory link) of the step's
//             collectives: stage 0 an all-reduce of the gradients; stage 1
//             that plus an all-gather of the parameters per unit; stage 2 a
//             reduce-scatter and an all-gather per unit; stage 3 two
//             all-gathers (forward, backward) and a reduce-scatter per unit;
//             plus the loss and norm sums, with gradient accumulation each
//             micro-batch's reduce-scatters and stage 3's gathers
//             (data_parallel_comm.hpp). On the CPU none of it counts as
//             hidden: every core computes, so the communicator thread's
//             copying and adding takes core time from compute. Workers on
//             devices run them on a stream of their own: the buckets and a
//             block's reduce-scatter hide behind the backward still to
//             come, stage 3's prefetched gathers behind the block before
//             (the probe's forward and backward, spread evenly over the
//             blocks); the report gives the hidden part.
//   tensor    with parallel.tensor = T, the compute is one tensor rank's
//             shards (the probe runs a rank's layout with its collectives
//             left out), the data-parallel terms above run over workers / T
//             ranks on the rank's part of the gradients, and the tensor
//             all-reduces inside the layers are added at the same link cost
//             (add_tensor_parallel_comm in job_forecast.cpp lists them).
//   pipeline  with parallel.pipeline = P, the compute is the schedule
//             simulated with every stage's measured times
//             (pipeline_forecast.hpp), each stage's memory its own (the
//             report's memory is the largest stage's, every stage listed);
//             the data-parallel terms run on the largest stage's gradients,
//             the tensor all-reduces count the stages' share on the
//             critical path, the sends between stages count what they add
//             to the schedule simulated with each message's link time (one
//             after another on a link, overlapping compute), and the tied
//             embedding's gradient sum is added at the link's cost.
//   experts   with model.n_expert > 1, the probe's model holds one expert
//             rank's experts (parallel.expert = X > 1: E / X of them, with
//             parallel/expert/mirrored_expert_group.hpp standing in for the
//             group: every rank routing as the probe's does, the probe
//             computes the rows of the busiest expert rank, with the job's
//             own router as initialized); per MoE layer and micro-batch a
//             counts all-to-all and 2 row all-to-alls forward, 2 backward,
//             of N k rows of C floats per rank (the busiest rank's share of
//             the probe's routing), over the expert group; the dense
//             gradients are averaged over the data ways, the experts' over
//             the data ranks holding the same experts (data / X); the
//             routing sums over the data ways. Memory: the rank's experts.
//   hosts     with HostLayout::hosts = H > 1, the workers split evenly over
//             H hosts in rank order (consecutive ranks per host, as
//             launchers place them; the mesh puts tensor groups inside a
//             host, then data, then pipeline stages), and every collective
//             whose group spans hosts is costed at the host's network link,
//             shared by the groups that cross it at once (plan/link_time.hpp's
//             rule: a ring with m members per host gets m / ranks-per-host
//             of it; sends and all-to-alls, which every rank runs, 1 /
//             ranks-per-host). The in-host link is then the one the job uses
//             between hosts too (TCP: a multi-host job's auto transport).
//   devices   workers off the CPU have a device each: the probe runs one
//             worker (no contention to measure), and the links are assumed,
//             not measured: HostLayout's device link between a host's
//             devices (the GPU family's NVLink, or PCIe), the network
//             between hosts. The report names them. A pipeline's stages
//             are each probed alone on the device, one after another.
#include <cstdio>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "meshtrain/comm/collectives/cost_model.hpp"
#include "meshtrain/train/config/job_config.hpp"
#include "meshtrain/train/engine/memory_budget.hpp"
#include "meshtrain/train/forecast/pipeline_forecast.hpp"
#include "meshtrain/train/loop/training_device.hpp"

namespace meshtrain {

// The hosts a job's workers run on (plan --config --hardware.nodes=H ...).
struct HostLayout {
  int hosts = 1;
  double inter_bytes_per_s = 0;  // each host's network link, per direction
  double inter_latency_s = 0;    // per message step; 0: the measured in-host link's
  // Workers on a device: the link assumed between a host's devices (this
  // machine's shared memory says nothing of NVLink), per direction, and
  // what it is, for the report (plan/hardware.hpp's links_of_gpu).
  double device_bytes_per_s = 0, device_latency_s = 0;
  std::string interconnect;
};

struct JobForecast {
  std::string model_kind;
  std::string device = "cpu";  // where the probe ran: "cuda:0 (NVIDIA H100 80GB HBM3)"
  size_t parameters = 0;
  int workers = 1, zero_stage = 0, threads = 1;
  int tensor = 1;  // tensor-parallel ways; data ways = workers / tensor
  int64_t batch_per_worker = 0;
  std::string algorithm;  // the all-reduce the job will use
  bool bf16_wire = false;  // parallel.reduce_dtype = "bf16": half the bytes of what crosses it
  MemoryPrediction model_state;
  size_t activations = 0, data = 0, checkpoint_copies = 0;
  int probe_steps = 0;
  double forward_backward_s = 0, update_s = 0, comm_s = 0;
  double comm_hidden_s = 0;  // of comm_s, behind forward and backward (workers on devices)
  double alone_forward_backward_s = 0;  // the probe with one worker running, for comparison
  double comm_bytes = 0;  // sent per worker per step
  double tensor_comm_s = 0, tensor_comm_bytes = 0;  // the tensor axis's all-reduces inside the layers
  int pipeline = 1;  // pipeline stages
  std::string schedule;
  int micro_batches = 1, virtual_stages = 1;
  double bubble = 0;  // of the simulated schedule
  double pipeline_comm_s = 0, pipeline_comm_bytes = 0;  // between stages, and the tied embedding's sum
  std::vector<StageForecast> stages;                    // pipeline jobs: every stage
  int experts = 1, expert = 1;  // model.n_expert; expert-parallel ways
  double routing_imbalance = 1;  // the busiest expert rank's rows over an even share (mean over MoE layers)
  double expert_comm_s = 0, expert_comm_bytes = 0;  // the all-to-alls inside the MoE layers
  int hosts = 1;
  std::vector<std::string> crossing;  // the groups whose collectives cross hosts
  // The workers share this host's cores (the CPU: the probe runs them all
  // at once), or each has a device of its own (the probe runs one).
  bool shared_host = true;
  std::string interconnect;  // workers on devices: the link assumed between them

  size_t memory_total() const { return model_state.total() + activations + data + checkpoint_copies; }
  double step_s() const {
    return forward_backward_s + update_s + comm_s - comm_hidden_s + tensor_comm_s + pipeline_comm_s + expert_comm_s;
  }
};

// `measure_links` gives this machine's link over a transport (Shm or Tcp;
// called only when there are several workers to talk); `opened` is the
// job's device (open_training_device). Throws ConfigError for jobs it does
// not model (parameter servers) or the device cannot run (check_device_job)
// and whatever building the job throws (missing data...).
JobForecast forecast_job(const JobConfig& config, const HostLayout& hosts,
                         const std::function<comm::CostTable(comm::TransportKind transport)>& measure_links,
                         const OpenedDevice& opened, std::FILE* log);

std::string format_job_forecast(const JobForecast& forecast);
nlohmann::json job_forecast_to_json(const JobForecast& forecast);

}  // namespace meshtrain
