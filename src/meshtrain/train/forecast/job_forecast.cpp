#include "meshtrain/train/forecast/job_forecast.hpp"

#include <algorithm>
#include <functional>
#include <vector>

#include "meshtrain/comm/mesh/device_mesh.hpp"
#include "meshtrain/core/error.hpp"
#include "meshtrain/core/threads.hpp"
#include "meshtrain/nn/gpt.hpp"
#include "meshtrain/parallel/zero/shard_layout.hpp"
#include "meshtrain/train/config/section_configs.hpp"
#include "meshtrain/train/forecast/data_parallel_comm.hpp"
#include "meshtrain/train/forecast/expert_forecast.hpp"
#include "meshtrain/train/forecast/job_links.hpp"
#include "meshtrain/train/forecast/pipeline_forecast.hpp"
#include "meshtrain/train/forecast/worker_probe.hpp"

namespace meshtrain {
namespace {

// Bytes a value takes between ranks: parallel.reduce_dtype's (docs/mixed_precision.md).
size_t wire_value_bytes(const JobConfig& config) {
  return config.parallel.reduce_dtype == Precision::Bf16 ? sizeof(uint16_t) : sizeof(float);
}

// The tensor axis's all-reduces, all on the critical path (a layer waits for
// its sum): per micro-batch of N = rows x positions, each block's row-parallel
// outputs (attention and MLP, forward) and column-parallel input gradients
// (backward), 4 of N x C floats; for GPT the vocabulary-parallel embedding
// (forward) and the head's input gradient (backward), 2 more, and the
// loss's row max, sum of exponentials and target logit, 3 of N floats. A
// MoE layer's experts each sum their own rows (c_proj forward, c_fc
// backward): E / X all-reduces each way of the busiest rank's rows instead
// of the dense MLP's 2 of N x C.
void add_tensor_parallel_comm(const JobConfig& config, const std::vector<ExpertLayerTraffic>& experts,
                              const comm::CostTable& links, JobForecast& f) {
  const auto& m = config.model;
  const bool gpt = m.kind == ModelKind::Gpt;
  const int64_t positions = gpt ? m.block_size : (m.image_size / m.patch_size) * (m.image_size / m.patch_size);
  const int64_t rows = config.training.batch_size / config.parallel.micro_batches * positions;
  // The activations in the wire's dtype, the loss's statistics in fp32 (all_reduce_sum_fp32).
  const size_t wide = size_t(rows * m.n_embd) * wire_value_bytes(config), narrow = size_t(rows) * sizeof(float);
  const int wide_count = int(4 * m.n_layer + (gpt ? 2 : 0)), narrow_count = gpt ? 3 : 0;
  const auto seconds = [&](size_t bytes) {
    return comm::all_reduce_seconds(links, comm::choose_all_reduce(links, bytes, f.tensor), bytes, f.tensor);
  };
  double per_micro_batch = wide_count * seconds(wide) + narrow_count * seconds(narrow);
  double summed = double(wide_count * wide + narrow_count * narrow);
  const int64_t local = m.n_expert / f.expert;
  for (const ExpertLayerTraffic& layer : experts) {
    const size_t per_expert =
        size_t(layer.received * double(rows) / double(local)) * size_t(m.n_embd) * wire_value_bytes(config);
    per_micro_batch += 2.0 * (double(local) * seconds(per_expert) - seconds(wide));
    summed += 2.0 * (double(local) * double(per_expert) - double(wide));
  }
  f.tensor_comm_s = per_micro_batch * double(config.parallel.micro_batches);
  f.tensor_comm_bytes = 2.0 * (f.tensor - 1) / f.tensor * summed * double(config.parallel.micro_batches);
}

// One activation (or its gradient) between two stages: a micro-batch's
// rows of C floats (this rank's under sequence parallelism).
size_t pipeline_message_bytes(const JobConfig& config) {
  const auto& m = config.model;
  const int64_t rows = config.training.batch_size / config.parallel.micro_batches * m.block_size;
  const int64_t seq = config.parallel.sequence_parallel ? config.parallel.tensor : 1;
  return size_t(rows / seq * m.n_embd) * wire_value_bytes(config);
}

// The pipeline's own terms beside the sends between stages (which the
// simulated schedule placed, probe_pipeline_job): the tied embedding's
// gradient sum, the loss and norm sums.
void add_pipeline_comm(const JobConfig& config, const Model& last_stage, const comm::CostTable& links,
                       JobForecast& f) {
  const auto* gpt = dynamic_cast<const Gpt*>(&last_stage);
  const size_t wte = gpt ? last_stage.store().view(gpt->head_wte_index()).numel * wire_value_bytes(config) : 0;
  f.pipeline_comm_s += comm::all_reduce_seconds(links, comm::choose_all_reduce(links, wte, 2), wte, 2) +
                       2 * comm::all_reduce_seconds(links, comm::AllReduceAlgorithm::Ring, sizeof(double), f.pipeline);
  f.pipeline_comm_bytes =
      2.0 * f.micro_batches * f.virtual_stages * double(pipeline_message_bytes(config)) + double(wte);
}

// A pipeline job's compute and memory from every stage's probe; returns the
// stages' models.
std::vector<std::unique_ptr<Model>> probe_pipeline_job(const JobConfig& config, int data_ways, JobForecast& f,
                                                       int steps, const comm::CostTable& links, const Device& device) {
  const double transfer = comm::all_gather_seconds(links, 2 * pipeline_message_bytes(config), 2);  // alpha + B beta
  PipelineProbe probe = probe_pipeline(config, f.workers, data_ways, f.threads, steps, transfer, device);
  f.pipeline_comm_s = probe.exposed_sends_s;
  f.schedule = enum_string(config.parallel.schedule);
  f.bubble = probe.bubble;
  f.forward_backward_s = probe.compute_s;
  f.alone_forward_backward_s = probe.alone_compute_s;
  f.data = probe.data;
  size_t largest = 0;
  for (size_t s = 0; s < probe.stages.size(); ++s) {
    const StageForecast& st = probe.stages[s];
    const StageForecast& big = probe.stages[largest];
    f.update_s = std::max(f.update_s, f.zero_stage >= 1 ? st.update_s / data_ways : st.update_s);
    if (st.model_state.total() + st.activations > big.model_state.total() + big.activations) largest = s;
  }
  f.model_state = probe.stages[largest].model_state;
  f.activations = probe.stages[largest].activations;
  // The whole model's parameters: every stage's, the tied copy once.
  f.parameters = 0;
  for (const auto& model : probe.models) f.parameters += model->store().global_parameter_count();
  const auto* last = dynamic_cast<const Gpt*>(probe.models.back().get());
  if (last && probe.models.size() > 1) f.parameters -= probe.models.back()->store().view(last->head_wte_index()).global_shape[0] *
                                                        size_t(config.model.n_embd);
  f.stages = probe.stages;
  return std::move(probe.models);
}

// Parameter-server workers do not wait for each other: no step time to forecast.
void check_forecastable(const JobConfig& config) {
  if (config.parallel.data == DataParallelism::ParameterServer)
    throw ConfigError("plan --config: parameter-server jobs are not forecast (workers do not wait for each other); "
                      "it covers parallel.data = \"allreduce\" at every ZeRO stage and one process");
}

// The job's shape from its config: the ways along each mesh axis, the
// workers, their threads and batch, the hosts.
JobForecast job_shape(const JobConfig& config, const HostLayout& hosts) {
  JobForecast f;
  f.tensor = int(config.parallel.tensor);
  f.pipeline = int(config.parallel.pipeline);
  f.micro_batches = int(config.parallel.micro_batches);
  f.virtual_stages = int(config.parallel.virtual_stages);
  const int model_ways = f.tensor * f.pipeline;
  f.workers = config.parallel.data == DataParallelism::AllReduce || model_ways > 1
                  ? int(std::max<int64_t>(model_ways, config.parallel.workers)) : 1;
  f.zero_stage = f.workers / model_ways > 1 ? int(config.parallel.zero_stage) : 0;
  // As the trainer does: training.threads, else this host's cores shared by its workers.
  f.threads = threads_for(config.training.threads, f.workers);
  f.batch_per_worker = config.training.batch_size;
  f.bf16_wire = config.parallel.reduce_dtype == Precision::Bf16;
  f.experts = int(config.model.n_expert);
  f.expert = f.experts > 1 ? int(config.parallel.expert) : 1;
  f.hosts = hosts.hosts;
  return f;
}

// The job's groups and their links: the mesh its workers cut their groups
// from (parallel/parallel_context.hpp); each group's link is that of worker
// 0's group along the axis.
struct JobGroups {
  JobLinks links;
  comm::DeviceMesh mesh;

  comm::CostTable link(const char* name, comm::MeshAxis axis, bool every_rank = false) {
    return links.group(name, mesh.group_ranks(axis, 0), every_rank);
  }
};

// The in-host link to measure: a job spanning hosts uses TCP between every
// pair (auto), in a host too.
std::function<comm::CostTable()> intra_host_link(
    const JobConfig& config, const HostLayout& hosts,
    const std::function<comm::CostTable(comm::TransportKind transport)>& measure_links, bool devices) {
  if (devices)
    return [&hosts] { return comm::CostTable::on_one_link(hosts.device_latency_s, 1.0 / hosts.device_bytes_per_s); };
  return [&config, &hosts, &measure_links] {
    const comm::TransportKind kind = config.parallel.transport;
    const bool tcp = kind == comm::TransportKind::Tcp || (kind == comm::TransportKind::Auto && hosts.hosts > 1);
    return measure_links(tcp ? comm::TransportKind::Tcp : comm::TransportKind::Shm);
  };
}

void log_probe_start(std::FILE* log, const JobForecast& f, int steps) {
  if (!log) return;
  const std::string together =
      f.workers > 1 && f.shared_host ? " and " + std::to_string(f.workers) + " at once" : "";
  std::fprintf(log, "probing: %d steps of %s on %d thread%s, alone%s...\n", steps,
               f.pipeline > 1 ? "each pipeline stage's pieces" : "one worker's model and batch", f.threads,
               f.threads == 1 ? "" : "s", together.c_str());
}

// What the probe leaves for the communication terms.
struct ProbedJob {
  std::unique_ptr<Model> model;  // a pipeline's stage with the most gradients: the data-parallel terms run on it
  std::vector<std::unique_ptr<Model>> stages;  // pipeline jobs' stages (the one moved to `model` is null)
  std::vector<ExpertLayerTraffic> traffic;
  // One micro-batch's forward and backward, which a device's communication
  // stream runs behind (0 where nothing hides: the CPU).
  double forward_s = 0, backward_s = 0;
};

ProbedJob probe_pipeline_stages(const JobConfig& config, int data_ways, int steps,
                                const comm::CostTable& pipeline_link, const Device& device, JobForecast& f) {
  ProbedJob probed;
  probed.stages = probe_pipeline_job(config, data_ways, f, steps, pipeline_link, device);
  std::vector<Model*> all;
  for (auto& stage : probed.stages) all.push_back(stage.get());
  probed.traffic = expert_traffic(all, config.model, f.expert);
  size_t largest = 0;
  for (size_t s = 0; s < probed.stages.size(); ++s)
    if (probed.stages[s]->store().flat_size() > probed.stages[largest]->store().flat_size()) largest = s;
  probed.model = std::move(probed.stages[largest]);
  // Its buckets run behind the rank's last backward (micro_batches.hpp): one
  // micro-batch's on one chunk, its weight gradients' included.
  if (!f.shared_host) {
    const StageForecast& stage = f.stages[largest];
    probed.forward_s = stage.forward_s;
    probed.backward_s = stage.backward_s + stage.weight_s;
  }
  return probed;
}

// One worker's model, alone and beside the others; `k` optimizer state
// floats per parameter.
ProbedJob probe_worker(const JobConfig& config, int data_ways, int steps, int k, ProbeGroups& groups,
                       const Device& device, JobForecast& f) {
  ProbedJob probed;
  probed.model = make_initialized_model(config, 0, groups, device);
  const Probe probe = run_probe(config, *probed.model, f.workers, f.threads, steps);
  probed.traffic = expert_traffic({probed.model.get()}, config.model, f.expert);
  f.activations = probe.activations;
  f.data = probe.data;
  f.parameters = probed.model->store().global_parameter_count();
  f.model_state = predict_memory(probed.model->store(), data_ways, f.zero_stage, k, config.parallel.micro_batches);
  f.alone_forward_backward_s = probe.alone.forward_backward_s;
  f.forward_backward_s = probe.contended.forward_backward_s;
  f.update_s = f.zero_stage >= 1 ? probe.contended.update_s / data_ways : probe.contended.update_s;
  if (!f.shared_host) {
    const double M = double(config.parallel.micro_batches);
    probed.forward_s = probe.alone.forward_s / M;
    probed.backward_s = std::max(0.0, probe.alone.forward_backward_s - probe.alone.forward_s) / M;
  }
  return probed;
}

// What the probed worker does not show alone: the other expert ranks'
// experts, in the whole model's count, and the checkpoint copies
// (checkpoint_saver.hpp): the worker's part of the parameters and of each
// optimizer state buffer, when a checkpoint is written asynchronously
// before the last step.
void add_whole_job_memory(const JobConfig& config, const ParamStore& store, int data_ways, int k, JobForecast& f) {
  if (f.expert > 1)
    for (const ParamView& v : store.views())
      if (v.expert) f.parameters += size_t(numel(v.global_shape)) * size_t(f.expert - 1);
  const size_t part = data_ways > 1 ? parallel::ShardLayout(store, 0, data_ways).local_size() : store.flat_size();
  if (config.checkpoint.async && config.checkpoint.every > 0 && config.checkpoint.every < config.training.steps)
    f.checkpoint_copies = part * sizeof(float) * size_t(1 + k);
}

// Each stage runs its share of the layers; the critical path holds M V + P - 1 stage-micro-batches.
double critical_path_share(const JobForecast& f) {
  return double(f.micro_batches * f.virtual_stages + f.pipeline - 1) /
         double(f.micro_batches * f.virtual_stages * f.pipeline);
}

// The tensor, data and pipeline axes' collectives.
void add_mesh_comm(const JobConfig& config, const ProbedJob& probed, int data_ways, JobGroups& groups,
                   JobForecast& f) {
  if (f.tensor > 1) {
    add_tensor_parallel_comm(config, probed.traffic, groups.link("tensor", comm::MeshAxis::Tensor), f);
    f.tensor_comm_s *= critical_path_share(f);
    f.tensor_comm_bytes /= f.pipeline;
  }
  if (data_ways > 1)
    add_data_parallel_comm({.algorithm = config.parallel.all_reduce,
                            .ways = data_ways,
                            .micro_batches = int(config.parallel.micro_batches),
                            .bucket_bytes = size_t(config.parallel.bucket_mb * (1 << 20)),
                            .bf16_wire = f.bf16_wire,
                            .forward_s = probed.forward_s,
                            .backward_s = probed.backward_s},
                           probed.model->store(), groups.link("data", comm::MeshAxis::Data),
                           groups.links.group("expert data", groups.mesh.expert_data_ranks(0)), f);
  else
    f.algorithm = "none";
  if (f.pipeline > 1)
    add_pipeline_comm(config, probed.stages.back() ? *probed.stages.back() : *probed.model,
                      groups.link("pipeline", comm::MeshAxis::Pipeline, true), f);
}

// The experts' all-to-alls, then after the last backward the stage's
// layers' routing sums over the data ways (router_sums.hpp) and the global
// norm's expert share over the expert group.
void add_expert_comm(const JobConfig& config, const std::vector<ExpertLayerTraffic>& traffic, int data_ways,
                     JobGroups& groups, JobForecast& f) {
  if (traffic.empty()) return;
  const int n = data_ways, X = f.expert;
  const int64_t rows = config.training.batch_size / config.parallel.micro_batches * config.model.block_size;
  const comm::CostTable a2a_link = X > 1 ? groups.link("expert", comm::MeshAxis::Expert, true) : comm::CostTable{};
  const ExpertComm a2a = expert_all_to_all_comm(traffic, rows, config.model.n_embd, config.model.n_expert, X,
                                                config.parallel.micro_batches, a2a_link, wire_value_bytes(config));
  f.expert_comm_s = a2a.seconds * critical_path_share(f);
  f.expert_comm_bytes = a2a.bytes / f.pipeline;
  size_t sums = 0;
  for (const ExpertLayerTraffic& layer : traffic) sums += layer.sums * sizeof(double);
  sums /= size_t(f.pipeline);
  if (n > 1) {
    const comm::CostTable data = groups.link("data", comm::MeshAxis::Data);
    f.expert_comm_s += comm::all_reduce_seconds(data, comm::choose_all_reduce(data, sums, n), sums, n);
  }
  if (X > 1)
    f.expert_comm_s += comm::all_reduce_seconds(groups.link("expert", comm::MeshAxis::Expert),
                                                comm::AllReduceAlgorithm::Ring, sizeof(double), X);
}

}  // namespace

JobForecast forecast_job(const JobConfig& config, const HostLayout& hosts,
                         const std::function<comm::CostTable(comm::TransportKind transport)>& measure_links,
                         const OpenedDevice& opened, std::FILE* log) {
  check_forecastable(config);
  JobForecast f = job_shape(config, hosts);
  check_device_job(opened.device, config);
  f.shared_host = opened.device.is_cpu();
  if (!f.shared_host && f.workers > 1) {
    if (hosts.device_bytes_per_s <= 0)
      throw ConfigError("plan --config: workers on " + config.training.device + " need the link between them");
    f.interconnect = hosts.interconnect;
  }
  f.device = device_name(opened.device) + (opened.gpu_name.empty() ? "" : " (" + opened.gpu_name + ")");
  const int data_ways = f.workers / (f.tensor * f.pipeline);
  // The links are checked before the probe: a layout that cannot be placed fails at once.
  JobGroups groups{JobLinks(hosts, f.workers, intra_host_link(config, hosts, measure_links, !f.shared_host)),
                   comm::DeviceMesh({.dp = data_ways, .tp = f.tensor, .pp = f.pipeline, .ep = f.expert},
                                    data_ways * f.tensor * f.pipeline)};

  constexpr int kProbeSteps = 8;
  log_probe_start(log, f, kProbeSteps);
  f.probe_steps = kProbeSteps;
  const int k = optimizer_state_floats(to_optimizer_config(config.optimizer));
  ProbeGroups probe_groups;  // outlives the probed models, whose collectives talk to it
  const ProbedJob probed =
      f.pipeline > 1 ? probe_pipeline_stages(config, data_ways, kProbeSteps,
                                             groups.link("pipeline", comm::MeshAxis::Pipeline, true), opened.device, f)
                     : probe_worker(config, data_ways, kProbeSteps, k, probe_groups, opened.device, f);
  f.model_kind = probed.model->kind();
  f.routing_imbalance = routing_imbalance(probed.traffic);
  add_whole_job_memory(config, probed.model->store(), data_ways, k, f);

  add_mesh_comm(config, probed, data_ways, groups, f);
  add_expert_comm(config, probed.traffic, data_ways, groups, f);
  f.crossing = groups.links.crossing();
  return f;
}

}  // namespace meshtrain
