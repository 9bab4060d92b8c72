#include "meshtrain/cli/plan_job_config.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "meshtrain/checkpoint/durable_io.hpp"
#include "meshtrain/core/enum_names.hpp"
#include "meshtrain/core/error.hpp"
#include "meshtrain/train/config/config_schema.hpp"

namespace meshtrain::cli {
namespace {

// Names here are unique within cli/: the layer is compiled as unity batches.

const plan::StrategyEstimate* recommended_estimate(const plan::Plan& p) {
  for (const plan::StrategyEstimate& e : p.strategies)
    if (e.key == p.recommendation.key) return &e;
  return nullptr;
}

std::string emit_layout_text(const plan::Layout& l) {
  std::string s = "dp" + std::to_string(l.dp);
  if (l.ep > 1) s += "(ep" + std::to_string(l.ep) + ")";
  if (l.tp > 1) s += " x tp" + std::to_string(l.tp);
  if (l.pp > 1) s += " x pp" + std::to_string(l.pp);
  return s;
}

int zero_stage_of(const std::string& key) {
  return key == "zero-1" ? 1 : key == "zero-2" ? 2 : key == "zero-3" ? 3 : 0;
}

// A fresh job's model: the plan's shape. A bare parameter count makes none.
void set_model_from_plan(const plan::ModelShape& shape, JobConfig& job) {
  if (!shape.has_shape())
    throw ConfigError("--emit-config: model.kind = \"params\" (a bare parameter count) gives no model to train; give "
                      "the shape (model.kind = \"gpt\" or \"vit\" with layers, hidden, heads...) or start from a job "
                      "with --config JOB.toml");
  ModelSection& m = job.model;
  m.n_layer = shape.layers;
  m.n_embd = shape.hidden;
  m.n_head = shape.heads;
  if (shape.kind == "gpt") {
    m.kind = ModelKind::Gpt;
    m.block_size = shape.seq_len;
    m.vocab_size = shape.vocab;
    m.n_expert = shape.experts;
    if (shape.is_moe()) m.top_k = shape.top_k;
    job.data.kind = DataKind::Text;
  } else {
    m.kind = ModelKind::Vit;
    m.image_size = shape.image_size;
    m.patch_size = shape.patch_size;
    m.classes = shape.classes;
    job.data.kind = DataKind::FashionMnist;
    job.data.path = "";  // Debian's dataset-fashion-mnist
  }
}

// The large-batch rule and the amount of training, when the plan has them.
void set_training_from_plan(const plan::Plan& p, JobConfig& job, std::vector<std::string>& notes) {
  const plan::PlanInput& in = p.input;
  if (p.amount.steps > 0) job.training.steps = int64_t(std::clamp(std::ceil(p.amount.steps), 1.0, 9e15));
  if (in.optimizer == "sgd" || in.optimizer == "momentum") job.optimizer.name = OptimizerKind::Sgd;
  if (in.optimizer == "sgd") job.optimizer.momentum = 0;
  if (!p.learning_rate.available) return;
  job.optimizer.lr = in.base_lr;
  job.schedule.scale_rule = ScaleRule::Linear;
  job.schedule.reference_batch = in.reference_batch;
  if (p.learning_rate.warmup_steps > 0 && p.learning_rate.warmup_steps < job.training.steps)
    job.schedule.warmup_steps = p.learning_rate.warmup_steps;
  else if (p.learning_rate.warmup_steps > 0)
    notes.push_back("the plan's " + std::to_string(p.learning_rate.warmup_steps) +
                    " warmup steps are not shorter than training.steps; no warmup set");
}

// The smallest divisor of n that is at least k (n itself if none smaller).
int64_t divisor_at_least(int64_t n, int64_t k) {
  for (int64_t d = std::max<int64_t>(1, k); d < n; ++d)
    if (n % d == 0) return d;
  return n;
}

void set_layout(const plan::Plan& p, const plan::StrategyEstimate& e, JobConfig& job,
                std::vector<std::string>& notes) {
  const plan::Layout& l = e.layout;
  ParallelSection& par = job.parallel;
  const std::string& key = e.key;
  const bool ps = key == "parameter-server";
  par.workers = l.workers();
  par.tensor = l.tp;
  par.expert = l.ep;
  par.zero_stage = zero_stage_of(key);
  par.data = ps ? DataParallelism::ParameterServer : l.dp > 1 ? DataParallelism::AllReduce : DataParallelism::None;
  par.all_reduce = key == "dp-ring"               ? comm::AllReduceAlgorithm::Ring
                   : key == "dp-tree"             ? comm::AllReduceAlgorithm::Tree
                   : key == "dp-reduction-server" ? comm::AllReduceAlgorithm::ReductionServer
                                                  : comm::AllReduceAlgorithm::Auto;
  if (key == "dp-reduction-server") par.reducers = p.input.cluster.reducers;  // 0: as many as workers
  if (l.tp == 1) par.sequence_parallel = false;
  if (par.pipeline != l.pp) {
    // The planner's pipeline: 1F1B over balanced stages.
    par.schedule = parallel::pipeline::ScheduleKind::OneFOneB;
    par.virtual_stages = 1;
    par.stage_layers.clear();
  }
  par.pipeline = l.pp;

  // The planner's global batch over the data ways, as micro-batches of at
  // most its micro-batch (a parameter-server worker pushes whole batches).
  const int64_t per_replica = (p.input.global_batch + l.dp - 1) / l.dp;
  job.training.batch_size = per_replica;
  par.micro_batches = ps ? 1 : divisor_at_least(per_replica, e.accumulation);
  if (per_replica * l.dp != p.input.global_batch)
    notes.push_back("global batch " + std::to_string(per_replica * l.dp) + " (" + std::to_string(per_replica) +
                    " per data-parallel worker), the plan's " + std::to_string(p.input.global_batch) +
                    " rounded up to a multiple of the " + std::to_string(l.dp) + " data ways");
  if (!ps && par.micro_batches != e.accumulation)
    notes.push_back(std::to_string(par.micro_batches) + " micro-batches of " +
                    std::to_string(per_replica / par.micro_batches) + " (the plan's " + std::to_string(e.micro_batch) +
                    " x " + std::to_string(e.accumulation) + " does not divide the batch)");
  if (ps && e.accumulation > 1)
    notes.push_back("parameter-server workers push whole batches: 1 micro-batch, not the plan's " +
                    std::to_string(e.accumulation));
  if (e.recompute)
    notes.push_back("the plan fits only with activation recomputation, which meshtrain does not run yet");
  if (p.input.precision != "fp32")
    notes.push_back("planned in " + p.input.precision + "; meshtrain trains in fp32 (memory per device is higher)");
}

}  // namespace

EmittedJob job_from_plan(const plan::Plan& p, const JobConfig* base) {
  const plan::Recommendation& r = p.recommendation;
  if (r.key == "none") {
    std::string hint;
    if (r.has_smallest_fit)
      hint = "; the smallest configuration that fits is " + std::to_string(r.smallest_fit.nodes) + " node(s) x " +
             std::to_string(r.smallest_fit.devices_per_node) + " devices (plan again with --hardware.nodes=" +
             std::to_string(r.smallest_fit.nodes) + " --hardware.devices_per_node=" +
             std::to_string(r.smallest_fit.devices_per_node) + ")";
    throw ConfigError("--emit-config: nothing fits on the hardware given, so there is no job to write" + hint);
  }
  const plan::StrategyEstimate* e = recommended_estimate(p);
  if (!e) throw Error("--emit-config: the recommended strategy '" + r.key + "' has no estimate");

  EmittedJob out;
  out.strategy = r.key;
  if (base) {
    out.config = *base;
  } else {
    set_model_from_plan(p.input.model, out.config);
    set_training_from_plan(p, out.config, out.notes);
  }
  set_layout(p, *e, out.config, out.notes);
  try {
    validate_job_config(out.config);
  } catch (const ConfigError& err) {
    throw ConfigError("--emit-config: the recommended layout (" + r.key + ", " + emit_layout_text(e->layout) +
                      ") makes a job config meshtrain refuses: " + err.what());
  }
  return out;
}

void add_job_to_plan(const JobConfig& job, const std::string& origin, plan::PlanValues& values) {
  for (auto it = values.begin(); it != values.end();)
    it = it->first.rfind("model.", 0) == 0 || it->first == "training.micro_batch" ? values.erase(it) : std::next(it);
  auto put = [&](const std::string& key, const std::string& text) { values[key] = {text, origin}; };
  const ModelSection& m = job.model;
  switch (m.kind) {
    case ModelKind::Gpt:
      put("model.kind", "gpt");
      put("model.seq_len", std::to_string(m.block_size));
      put("model.vocab", std::to_string(m.vocab_size));
      put("model.experts", std::to_string(m.n_expert));
      if (m.n_expert > 1) put("model.top_k", std::to_string(m.top_k));
      break;
    case ModelKind::Vit:
      put("model.kind", "vit");
      put("model.image_size", std::to_string(m.image_size));
      put("model.patch_size", std::to_string(m.patch_size));
      put("model.channels", "1");
      put("model.classes", std::to_string(m.classes));
      break;
    case ModelKind::Mlp: {
      // Pixels -> hidden... -> classes, weights and biases.
      double params = 0, width = double(m.image_size * m.image_size);
      for (int64_t h : m.hidden) {
        params += width * double(h) + double(h);
        width = double(h);
      }
      params += width * double(m.classes) + double(m.classes);
      put("model.kind", "params");
      put("model.params", std::to_string(int64_t(params)));
      break;
    }
  }
  if (m.kind != ModelKind::Mlp) {
    put("model.layers", std::to_string(m.n_layer));
    put("model.hidden", std::to_string(m.n_embd));
    put("model.heads", std::to_string(m.n_head));
  }
  const ParallelSection& par = job.parallel;
  const int64_t data_ways =
      par.data == DataParallelism::None ? 1 : std::max<int64_t>(1, par.workers / (par.tensor * par.pipeline));
  put("training.global_batch", std::to_string(job.training.batch_size * data_ways));
  const bool momentum = job.optimizer.name == OptimizerKind::Sgd && job.optimizer.momentum > 0;
  put("training.optimizer", momentum ? "momentum" : enum_string(job.optimizer.name));
  put("training.precision", "fp32");
}

std::string emitted_config_text(const EmittedJob& job, const std::string& path) {
  const ParallelSection& par = job.config.parallel;
  std::string head = "# Written by `meshtrain plan --emit-config`: the recommended strategy " + job.strategy + ", " +
                     std::to_string(par.workers) + (par.workers == 1 ? " worker" : " workers") + " (tensor " +
                     std::to_string(par.tensor) + ", pipeline " + std::to_string(par.pipeline) + ", expert " +
                     std::to_string(par.expert) + ", ZeRO stage " + std::to_string(par.zero_stage) + ").\n";
  for (const std::string& n : job.notes) head += "# Note: " + n + ".\n";
  head += "# Forecast it here: meshtrain plan --config " + path + "\n# Run it: meshtrain run " + path + "\n\n";
  return head + job_config_to_toml(job.config);
}

void check_may_write(const std::string& path, bool force) {
  std::error_code ec;
  if (!force && std::filesystem::exists(path, ec))
    throw ConfigError("--emit-config: " + path + " exists; pass --force to overwrite it");
  if (std::filesystem::is_directory(path, ec))
    throw ConfigError("--emit-config: " + path + " is a directory");
}

void write_file_atomically(const std::string& path, const std::string& text) {
  checkpoint::AtomicFile file(path);
  file.write(text.data(), text.size());
  file.commit();
}

}  // namespace meshtrain::cli
