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

std::string emit_layout_text(const plan::Layout& l) {
  std::string s = "dp" + std::to_string(l.dp);
  if (l.ep > 1) s += "(ep" + std::to_string(l.ep) + ")";
  if (l.tp > 1) s += " x tp" + std::to_string(l.tp);
  if (l.pp > 1) s += " x pp" + std::to_string(l.pp);
  return s;
}

comm::AllReduceAlgorithm all_reduce_of(plan::StrategyKind kind) {
  switch (kind) {
    case plan::StrategyKind::DataParallelRing: return comm::AllReduceAlgorithm::Ring;
    case plan::StrategyKind::DataParallelTree: return comm::AllReduceAlgorithm::Tree;
    case plan::StrategyKind::ReductionServer: return comm::AllReduceAlgorithm::ReductionServer;
    default: return comm::AllReduceAlgorithm::Auto;
  }
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
  if (shape.kind == plan::ShapeKind::Gpt) {
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

// The plan's numbers as the runtime's: fp32, or its one 16-bit format, bf16
// (core/precision.hpp), whose memory differs from the plan's mixed precision.
void set_precision_from_plan(plan::PlanPrecision planned, JobConfig& job, std::vector<std::string>& notes) {
  if (planned == plan::PlanPrecision::Fp32) {
    job.training.precision = Precision::Fp32;
    return;
  }
  job.training.precision = Precision::Bf16;
  if (planned == plan::PlanPrecision::Fp16) notes.push_back("planned in fp16; meshtrain's 16-bit format is bf16");
  notes.push_back("meshtrain's bf16 keeps fp32 parameters and gradients and bf16 copies of the weights: up to 2 "
                  "bytes per parameter more than planned");
}

// The plan's optimizer by its state: none (sgd), momentum, or Adam's (adamw).
void set_optimizer_from_plan(plan::PlanOptimizer planned, OptimizerSection& optimizer) {
  switch (planned) {
    case plan::PlanOptimizer::Sgd:
      optimizer.name = OptimizerKind::Sgd;
      optimizer.momentum = 0;
      break;
    case plan::PlanOptimizer::Momentum: optimizer.name = OptimizerKind::Sgd; break;
    case plan::PlanOptimizer::Adam: break;  // the default, AdamW
  }
}

// The optimizer, large-batch rule and amount of training, when the plan has them.
void set_training_from_plan(const plan::Plan& p, JobConfig& job, std::vector<std::string>& notes) {
  const plan::PlanInput& in = p.input;
  if (p.amount.steps > 0) job.training.steps = int64_t(std::clamp(std::ceil(p.amount.steps), 1.0, 9e15));
  set_optimizer_from_plan(in.optimizer, job.optimizer);
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
  const bool ps = e.kind == plan::StrategyKind::ParameterServer;
  par.workers = l.workers();
  par.tensor = l.tp;
  par.expert = l.ep;
  par.zero_stage = plan::zero_stage(e.kind);
  par.data = ps ? DataParallelism::ParameterServer : l.dp > 1 ? DataParallelism::AllReduce : DataParallelism::None;
  par.all_reduce = all_reduce_of(e.kind);
  // The Reduction Server's reducers; 0: as many as the workers.
  if (e.kind == plan::StrategyKind::ReductionServer) par.reducers = p.input.cluster.reducers;
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
}

}  // namespace

EmittedJob job_from_plan(const plan::Plan& p, const JobConfig* base) {
  const plan::Recommendation& r = p.recommendation;
  if (!r.strategy) {
    std::string hint;
    if (r.has_smallest_fit)
      hint = "; the smallest configuration that fits is " + std::to_string(r.smallest_fit.nodes) + " node(s) x " +
             std::to_string(r.smallest_fit.devices_per_node) + " devices (plan again with --hardware.nodes=" +
             std::to_string(r.smallest_fit.nodes) + " --hardware.devices_per_node=" +
             std::to_string(r.smallest_fit.devices_per_node) + ")";
    throw ConfigError("--emit-config: nothing fits on the hardware given, so there is no job to write" + hint);
  }
  const plan::StrategyEstimate* e = r.estimate(p.strategies);
  if (!e) throw Error("--emit-config: the recommended strategy '" + r.key() + "' has no estimate");

  EmittedJob out;
  out.strategy = r.key();
  if (base) {
    out.config = *base;
  } else {
    set_model_from_plan(p.input.model, out.config);
    set_training_from_plan(p, out.config, out.notes);
  }
  set_layout(p, *e, out.config, out.notes);
  // What the plan assumed to fit: its numbers (a base job's were planned as
  // they are) and recomputation, which in the plan is full (a block keeps
  // only its input).
  if (!base) set_precision_from_plan(p.input.precision, out.config, out.notes);
  if (e->recompute) out.config.training.recompute = nn::Recompute::Full;
  try {
    validate_job_config(out.config);
  } catch (const ConfigError& err) {
    throw ConfigError("--emit-config: the recommended layout (" + r.key() + ", " + emit_layout_text(e->layout) +
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
  // bf16 as the plan's mixed precision: the same model-state bytes per
  // parameter in all (meshtrain's fp32 weights and gradients are the plan's
  // 16-bit ones plus its fp32 master copy), 16-bit activations and FLOP/s.
  put("training.precision",
      enum_string(job.training.precision == Precision::Bf16 ? plan::PlanPrecision::Bf16 : plan::PlanPrecision::Fp32));
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
