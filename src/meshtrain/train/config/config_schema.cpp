#include "meshtrain/train/config/config_schema.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <sstream>
#include <toml++/toml.h>
#include <type_traits>

#include "meshtrain/core/enum_names.hpp"
#include "meshtrain/core/error.hpp"
#include "meshtrain/parallel/pipeline/stage_split.hpp"

namespace meshtrain {

[[noreturn]] void fail_config(const std::string& origin, const std::string& key, const std::string& what) {
  throw ConfigError(origin + ": " + key + ": " + what);
}
namespace {

enum class FieldType { Int, Float, Bool, String, IntList, Enum };

// An Enum field's value through its enum's name table.
struct EnumAccess {
  std::string (*name)(const void* value) = nullptr;
  bool (*parse)(void* value, std::string_view name) = nullptr;  // false: not a name of the table
};

template <class E>
EnumAccess enum_access() {
  return {[](const void* value) { return std::string(enum_name(*static_cast<const E*>(value))); },
          [](void* value, std::string_view name) {
            const std::optional<E> parsed = parse_enum<E>(name);
            if (parsed) *static_cast<E*>(value) = *parsed;
            return parsed.has_value();
          }};
}

// A numeric range; an open end excludes its bound.
struct Range {
  double lo = -HUGE_VAL, hi = HUGE_VAL;
  bool lo_open = false, hi_open = false;
  bool contains(double v) const {
    return (lo_open ? v > lo : v >= lo) && (hi_open ? v < hi : v <= hi);
  }
  std::string text() const {
    std::ostringstream s;
    s << (lo_open ? "(" : "[") << lo << ", " << hi << (hi_open ? ")" : "]");
    return s.str();
  }
};

struct Field {
  std::string section, key;
  FieldType type;
  Range range;                       // Int, Float, IntList elements
  std::vector<std::string> choices;  // Enum: its names
  std::string doc;
  std::function<void*(JobConfig&)> at;
  EnumAccess enumerated;             // Enum
  bool may_be_empty = false;         // IntList: [] allowed
  std::string name() const { return section + "." + key; }
};

Range closed(double lo, double hi) { return {lo, hi, false, false}; }
Range left_open(double lo, double hi) { return {lo, hi, true, false}; }
Range right_open(double lo, double hi) { return {lo, hi, false, true}; }
constexpr double kMaxInt = 9007199254740992.0;  // 2^53: exact in a double

#define MT_FIELD(SEC, KEY, TYPE, RANGE, DOC) \
  Field { #SEC, #KEY, FieldType::TYPE, RANGE, {}, DOC, [](JobConfig& c) -> void* { return &c.SEC.KEY; }, {} }
// A key whose values are the names of its enum's table.
#define MT_ENUM(SEC, KEY, DOC)                                                                        \
  Field {                                                                                             \
    #SEC, #KEY, FieldType::Enum, {}, enum_name_list<decltype(JobConfig::SEC.KEY)>(), DOC,             \
        [](JobConfig& c) -> void* { return &c.SEC.KEY; }, enum_access<decltype(JobConfig::SEC.KEY)>() \
  }

// [model]
std::vector<Field> model_fields() {
  return {
      MT_ENUM(model, kind, "model family"),
      MT_FIELD(model, n_layer, Int, closed(1, 1024), "transformer blocks (gpt, vit)"),
      MT_FIELD(model, n_embd, Int, closed(1, 65536), "width C (gpt, vit)"),
      MT_FIELD(model, n_head, Int, closed(1, 1024), "attention heads; must divide n_embd"),
      MT_FIELD(model, block_size, Int, closed(1, 65536), "context length T (gpt)"),
      MT_FIELD(model, vocab_size, Int, closed(1, 1 << 20),
               "vocabulary (gpt): at least 256 for data.kind = \"text\" (bytes); for token files, above every id"),
      MT_FIELD(model, n_expert, Int, closed(1, 4096), "experts per mixture-of-experts MLP (gpt); 1: dense MLPs"),
      MT_FIELD(model, top_k, Int, closed(1, 4096), "experts each token is routed to (n_expert > 1)"),
      MT_FIELD(model, moe_every, Int, closed(1, 1024), "block i's MLP is a mixture of experts when i % moe_every == 0"),
      MT_FIELD(model, capacity_factor, Float, closed(0, 1024),
               "tokens an expert takes per sequence: ceil(factor x T x top_k / n_expert), the rest dropped; 0: dropless"),
      MT_FIELD(model, aux_loss_coef, Float, closed(0, 100), "Switch/GShard load-balancing loss over the global batch"),
      MT_FIELD(model, z_loss_coef, Float, closed(0, 100), "router z-loss: mean of logsumexp(router logits)^2"),
      MT_FIELD(model, expert_bias_rate, Float, closed(0, 1),
               "auxiliary-loss-free balancing (DeepSeek-V3): per-expert routing bias step per optimizer step; 0: off"),
      MT_FIELD(model, hidden, IntList, closed(1, 65536), "hidden layer widths (mlp)"),
      MT_FIELD(model, classes, Int, closed(2, 65536), "output classes (mlp, vit)"),
      MT_FIELD(model, image_size, Int, closed(1, 4096), "image side in pixels (vit)"),
      MT_FIELD(model, patch_size, Int, closed(1, 4096), "patch side in pixels; divides image_size (vit)"),
      MT_FIELD(model, init_from, String, {},
               "start from these parameters: a Hugging Face GPT-2 directory or safetensors file, or a meshtrain "
               "checkpoint; empty: random"),
  };
}

// [data]
std::vector<Field> data_fields() {
  return {
      MT_ENUM(data, kind, "dataset kind"),
      MT_FIELD(data, path, String, {}, "text file, or Fashion-MNIST directory (empty: Debian's)"),
      MT_FIELD(data, val_fraction, Float, left_open(0, 0.5),
               "share of a text file (or of train_path's tokens, without val_path) held out for validation"),
      MT_FIELD(data, seed, Int, closed(0, kMaxInt), "seed of the shuffling"),
      MT_FIELD(data, train_path, String, {},
               "token file of the train split (kind = tokens): nanoGPT's raw uint16 or llm.c's .bin (told apart "
               "by llm.c's magic), memory-mapped"),
      MT_FIELD(data, val_path, String, {},
               "token file of the validation split (kind = tokens); empty: the last val_fraction of train_path"),
      MT_FIELD(data, tokenizer, String, {},
               "tokenizer.json (or GPT-2's vocab.json, merges.txt beside it) that made the token files; generate "
               "encodes prompts and decodes with it (kind = tokens)"),
      MT_ENUM(data, order,
              "training order: random (a shuffle per epoch) or sequential (global step s takes windows [s*G, (s+1)*G), "
              "G = data ranks x batch_size, data rank r the r-th batch_size of them; window i starts at token i x "
              "block_size)"),
  };
}

// [training]
std::vector<Field> training_fields() {
  return {
      MT_FIELD(training, batch_size, Int, closed(1, 1 << 24), "samples per step on each device"),
      MT_FIELD(training, steps, Int, closed(1, kMaxInt), "optimizer steps in the run"),
      MT_FIELD(training, seed, Int, closed(0, kMaxInt), "seed of parameter initialization"),
      MT_FIELD(training, threads, Int, closed(0, 1024), "compute threads; 0: the cores, shared among the job's processes on this host"),
      MT_FIELD(training, log_every, Int, closed(1, kMaxInt), "steps between metrics lines"),
      MT_FIELD(training, eval_every, Int, closed(0, kMaxInt), "steps between validations; 0: at the end only"),
      MT_FIELD(training, eval_batches, Int, closed(1, kMaxInt), "validation batches per evaluation"),
      MT_FIELD(training, out_dir, String, {}, "run directory (metrics, checkpoints)"),
      MT_FIELD(training, max_memory_mb, Float, closed(0, 1 << 30),
               "per-rank memory limit in MiB, checked before training and after each step; 0: none"),
      MT_FIELD(training, peak_tflops, Float, closed(0, 1e6),
               "one device's peak TFLOP/s at the job's precision, which the metrics' mfu divides by; 0: the GPU's "
               "datasheet figure where meshtrain knows it (H100/H200 989.4 bf16, 66.9 fp32), no mfu on a CPU"),
      MT_ENUM(training, recompute,
              "activation recomputation: selective (attention's probabilities) or full (a block keeps its input)"),
      MT_ENUM(training, precision,
              "the matrix products of the linear layers, attention and the output layer: bf16 operands with fp32 sums (weights, gradients and optimizer "
              "state stay fp32), or fp32"),
      MT_ENUM(training, attention,
              "attention's kernel: probabilities (keeps the (B, heads, T, T) softmax for backward), flash "
              "(blocks with an online softmax that keep each row's log-sum-exp: memory linear in T), or auto "
              "(flash from a context of 512 on)"),
      MT_FIELD(training, device, String, {},
               "where the model trains: \"cpu\", \"cuda\" (the GPU numbered LOCAL_RANK under a launcher, else 0) or "
               "\"cuda:N\"; a GPU that cannot be used stops the job with the reason, exit status 3 (docs/gpu.md)"),
      MT_FIELD(training, skip_steps, String, {},
               "steps whose update is skipped (their batch is read, the model left as it is), e.g. "
               "\"1200-1250, 3000\" (1-based, as the logs count them); empty: none"),
      MT_FIELD(training, spike_sigma, Float, closed(0, 1000),
               "> 0: skip the update of a step whose loss or gradient norm exceeds the mean + this many standard "
               "deviations of the last spike_window updates (OLMo: 6); 0: off"),
      MT_FIELD(training, spike_window, Int, closed(2, 1 << 20), "updates the spike statistics look back over"),
      MT_FIELD(training, check_replicas_every, Int, closed(0, 1 << 30),
               "> 0: every this many steps, compare a hash of each tensor across the workers holding replicas of "
               "it (silent data corruption) and stop naming the worker and tensor on a mismatch; not with ZeRO-3 "
               "(no replicas); 0: off"),
  };
}

// [optimizer]
std::vector<Field> optimizer_fields() {
  return {
      MT_ENUM(optimizer, name, "optimizer"),
      MT_FIELD(optimizer, lr, Float, left_open(0, 10), "base learning rate"),
      MT_FIELD(optimizer, weight_decay, Float, closed(0, 10), "decoupled weight decay"),
      MT_FIELD(optimizer, beta1, Float, right_open(0, 1), "Adam/LAMB first-moment decay"),
      MT_FIELD(optimizer, beta2, Float, right_open(0, 1), "Adam/LAMB second-moment decay"),
      MT_FIELD(optimizer, eps, Float, left_open(0, 1), "Adam/LAMB epsilon"),
      MT_FIELD(optimizer, momentum, Float, right_open(0, 1), "SGD/LARS momentum"),
      MT_FIELD(optimizer, nesterov, Bool, {}, "Nesterov momentum (sgd)"),
      MT_FIELD(optimizer, trust_coefficient, Float, left_open(0, 10), "LARS trust coefficient"),
      MT_FIELD(optimizer, grad_clip, Float, closed(0, 1e9), "max global gradient norm; 0: off"),
  };
}

// [schedule]
std::vector<Field> schedule_fields() {
  return {
      MT_FIELD(schedule, warmup_steps, Int, closed(0, kMaxInt), "linear warmup steps"),
      MT_ENUM(schedule, decay, "decay after warmup"),
      MT_FIELD(schedule, min_lr_ratio, Float, closed(0, 1), "final lr as a share of the peak"),
      MT_ENUM(schedule, scale_rule, "lr scaling by global batch"),
      MT_FIELD(schedule, reference_batch, Int, closed(0, 1 << 30), "batch lr was tuned for; 0: per-device batch"),
  };
}

// [checkpoint]
std::vector<Field> checkpoint_fields() {
  return {
      MT_FIELD(checkpoint, dir, String, {}, "checkpoint directory; empty: <out_dir>/checkpoints"),
      MT_FIELD(checkpoint, every, Int, closed(0, kMaxInt), "steps between checkpoints; 0: at the end"),
      MT_FIELD(checkpoint, keep, Int, closed(1, 1 << 20), "complete checkpoints to keep"),
      MT_FIELD(checkpoint, async, Bool, {}, "write checkpoints on a thread while training goes on"),
  };
}

// [metrics]
std::vector<Field> metrics_fields() {
  return {
      MT_FIELD(metrics, path, String, {}, "JSONL metrics file; empty: <out_dir>/metrics.jsonl"),
      MT_FIELD(metrics, tensorboard, Bool, {},
               "also write the metrics as TensorBoard scalars to <out_dir>/tb (worker 0 and evaluators)"),
      MT_FIELD(metrics, trace, String, {},
               "Chrome/Perfetto trace JSON of the last step's pipeline actions on every rank; empty: none"),
      MT_FIELD(metrics, prometheus_port, Int, closed(0, 65535),
               "> 0: the lead worker serves /metrics (Prometheus text format) and /healthz on this port; 0: off"),
      MT_FIELD(metrics, prometheus_address, String, {},
               "address the Prometheus endpoint listens on (default loopback; 0.0.0.0: every interface)"),
  };
}

// [parallel]
std::vector<Field> parallel_fields() {
  return {
      MT_ENUM(parallel, data, "data parallelism: none, synchronous all-reduce, or asynchronous parameter servers"),
      MT_ENUM(parallel, all_reduce, "gradient all-reduce algorithm (data = allreduce)"),
      MT_FIELD(parallel, zero_stage, Int, closed(0, 3),
               "ZeRO sharding (data = allreduce): 1 optimizer state, 2 also gradients, 3 also parameters (FSDP)"),
      MT_ENUM(parallel, reduce_dtype,
              "what crosses the wire in bf16 (half the bytes; sums in fp32, each step rounded to bf16) or fp32: the "
              "data-parallel gradient all-reduce, ZeRO's reduce-scatters and ZeRO-3's parameter all-gathers, the "
              "tied embedding's gradient sum, and tensor, pipeline and expert parallelism's activations and their "
              "gradients"),
      MT_FIELD(parallel, bucket_mb, Float, left_open(0, 65536),
               "gradient bucket size in MiB; each bucket is all-reduced as soon as backward has filled it"),
      MT_FIELD(parallel, micro_batches, Int, closed(1, 1 << 20),
               "gradient accumulation: each worker's training.batch_size runs as this many micro-batches, their "
               "gradients summed before one synchronisation and one optimizer step"),
      MT_FIELD(parallel, tensor, Int, closed(1, 4096),
               "tensor-parallel ways (Megatron): each transformer block's attention heads, MLP units and the "
               "vocabulary split over this many consecutive workers; data-parallel ways = workers / tensor"),
      MT_FIELD(parallel, sequence_parallel, Bool, {},
               "with tensor > 1 (gpt): the residual stream and layernorms run on each tensor rank's share of the "
               "batch's tokens; the tensor all-reduces become reduce-scatters and all-gathers"),
      MT_FIELD(parallel, expert, Int, closed(1, 4096),
               "expert-parallel ways (gpt with n_expert > 1), carved out of the data-parallel ways: each of this "
               "many consecutive data ranks holds n_expert / expert of the experts; tokens reach them by all-to-all"),
      MT_FIELD(parallel, pipeline, Int, closed(1, 1024),
               "pipeline stages (gpt): consecutive layers on consecutive groups of workers, micro-batches flowing "
               "through them; workers = data x tensor x pipeline ways"),
      MT_ENUM(parallel, schedule, "pipeline schedule (pipeline > 1)"),
      MT_FIELD(parallel, virtual_stages, Int, closed(1, 64),
               "model chunks per pipeline rank (schedule = interleaved; 1 otherwise)"),
      [] {
        Field f = MT_FIELD(parallel, stage_layers, IntList, closed(0, 1024),
                           "layers of each of the pipeline x virtual_stages stages, in order; []: balanced");
        f.may_be_empty = true;
        return f;
      }(),
      MT_ENUM(parallel, transport, "auto: shared memory on one host, TCP across hosts"),
      MT_ENUM(parallel, device_collectives,
              "workers on GPUs (training.device = \"cuda\"): auto: NCCL where every worker has a GPU of its own "
              "and libnccl.so.2 loads, else staged through host memory over parallel.transport; nccl: insist; "
              "host_staged: never NCCL"),
      MT_FIELD(parallel, timeout_s, Float, left_open(0, 86400 * 7), "longest wait for a peer, in seconds"),
      MT_FIELD(parallel, workers, Int, closed(1, 4096), "worker processes `meshtrain run` starts"),
      MT_FIELD(parallel, reducers, Int, closed(0, 4096),
               "reducer processes for all_reduce = reduction_server; 0: as many as workers"),
      MT_FIELD(parallel, servers, Int, closed(1, 4096), "parameter-server processes (data = parameter_server)"),
      MT_FIELD(parallel, max_staleness, Int, closed(-1, 1 << 30),
               "parameter server: steps a worker may run ahead of the slowest; -1: unbounded"),
      MT_FIELD(parallel, evaluators, Int, closed(0, 64), "evaluator processes: evaluate each new checkpoint"),
      MT_FIELD(parallel, max_restarts, Int, closed(0, 1000),
               "`meshtrain run`: a dead parameter-server worker is restarted alone (this many times); any other "
               "failure restarts the whole job (this many times) from its newest complete checkpoint"),
      MT_FIELD(parallel, restart_backoff_s, Float, closed(0, 3600),
               "`meshtrain run`: wait before the first whole-job restart; doubles per restart, at most 30 s"),
      MT_FIELD(parallel, heartbeat_timeout_s, Float, closed(0, 86400 * 7),
               "`meshtrain run`: a worker that has not finished a step for this long (or its first within "
               "max(this, 60 s)) is killed as hung and the job restarted; 0: off"),
      MT_FIELD(parallel, stop_grace_s, Float, closed(0, 86400),
               "`meshtrain run`: time the workers get to checkpoint and exit after a preemption (SIGTERM, SIGUSR1) "
               "before SIGKILL; a failed peer's survivors get 5 s"),
  };
}

// Every key, section by section, in the order the key listings print them.
const std::vector<Field>& fields() {
  static const std::vector<Field> table = [] {
    std::vector<Field> all;
    for (auto section : {model_fields, data_fields, training_fields, optimizer_fields, schedule_fields,
                         checkpoint_fields, metrics_fields, parallel_fields})
      for (Field& f : section()) all.push_back(std::move(f));
    return all;
  }();
  return table;
}
#undef MT_FIELD
#undef MT_ENUM

const Field* find_field(std::string_view section, std::string_view key) {
  for (const auto& f : fields())
    if (f.section == section && f.key == key) return &f;
  return nullptr;
}

bool section_exists(std::string_view section) {
  for (const auto& f : fields())
    if (f.section == section) return true;
  return false;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

int64_t read_int(const toml::node& node, const Field& f, const std::string& origin) {
  if (!node.is_integer()) {
    std::ostringstream got;
    got << node.type();
    fail_config(origin, f.name(), "expected an integer, got " + got.str());
  }
  auto v = node.value<int64_t>().value();
  if (!f.range.contains(static_cast<double>(v)))
    fail_config(origin, f.name(), "value " + std::to_string(v) + " is out of range " + f.range.text());
  return v;
}

void set_field(JobConfig& config, const Field& f, const toml::node& node, const std::string& origin) {
  void* p = f.at(config);
  switch (f.type) {
    case FieldType::Int: *static_cast<int64_t*>(p) = read_int(node, f, origin); break;
    case FieldType::Float: {
      if (!node.is_number()) fail_config(origin, f.name(), "expected a number");
      double v = node.is_integer() ? static_cast<double>(node.value<int64_t>().value()) : node.value<double>().value();
      if (!std::isfinite(v) || !f.range.contains(v))
        fail_config(origin, f.name(), "value " + std::to_string(v) + " is out of range " + f.range.text());
      *static_cast<double*>(p) = v;
      break;
    }
    case FieldType::Bool:
      if (!node.is_boolean()) fail_config(origin, f.name(), "expected true or false");
      *static_cast<bool*>(p) = node.value<bool>().value();
      break;
    case FieldType::String:
      if (!node.is_string()) fail_config(origin, f.name(), "expected a string");
      *static_cast<std::string*>(p) = node.value<std::string>().value();
      break;
    case FieldType::Enum: {
      if (!node.is_string()) fail_config(origin, f.name(), "expected a string");
      const std::string v = node.value<std::string>().value();
      if (!f.enumerated.parse(p, v))
        fail_config(origin, f.name(), "unknown value '" + v + "' (expected one of: " + join(f.choices) + ")");
      break;
    }
    case FieldType::IntList: {
      const auto* arr = node.as_array();
      if (!arr || (arr->empty() && !f.may_be_empty)) fail_config(origin, f.name(), "expected a non-empty array of integers");
      std::vector<int64_t> values;
      for (const auto& el : *arr) values.push_back(read_int(el, f, origin));
      *static_cast<std::vector<int64_t>*>(p) = values;
      break;
    }
  }
}

std::string type_name(FieldType t) {
  switch (t) {
    case FieldType::Int: return "integer";
    case FieldType::Float: return "float";
    case FieldType::Bool: return "bool";
    case FieldType::String:
    case FieldType::Enum: return "string";
    case FieldType::IntList: return "integer array";
  }
  return "?";
}

std::string value_text(JobConfig& config, const Field& f) {
  void* p = f.at(config);
  std::ostringstream s;
  switch (f.type) {
    case FieldType::Int: s << *static_cast<int64_t*>(p); break;
    case FieldType::Float: {
      s.precision(17);
      s << *static_cast<double*>(p);
      std::string t = s.str();
      // Keep it a TOML float, not an integer.
      if (t.find_first_of(".eEn") == std::string::npos) t += ".0";
      return t;
    }
    case FieldType::Bool: s << (*static_cast<bool*>(p) ? "true" : "false"); break;
    case FieldType::String:
    case FieldType::Enum: {
      toml::value<std::string> v(f.type == FieldType::Enum ? f.enumerated.name(p) : *static_cast<std::string*>(p));
      s << v;
      break;
    }
    case FieldType::IntList: {
      s << "[";
      const auto& v = *static_cast<std::vector<int64_t>*>(p);
      for (size_t i = 0; i < v.size(); ++i) s << (i ? ", " : "") << v[i];
      s << "]";
      break;
    }
  }
  return s.str();
}

}  // namespace

namespace {

// The TOML text over the defaults, each key checked alone; the relations
// between keys are validate_job_config's.
JobConfig parse_unvalidated(std::string_view toml_text, const std::string& origin) {
  toml::table root;
  try {
    root = toml::parse(toml_text, origin);
  } catch (const toml::parse_error& e) {
    const auto& where = e.source().begin;
    throw ConfigError(origin + ":" + std::to_string(where.line) + ":" + std::to_string(where.column) +
                      ": malformed TOML: " + std::string(e.description()));
  }
  JobConfig config;
  for (auto&& [section_key, section_node] : root) {
    std::string section(section_key.str());
    if (!section_exists(section)) fail_config(origin, section, "unknown section");
    const auto* table = section_node.as_table();
    if (!table) fail_config(origin, section, "expected a [" + section + "] table");
    for (auto&& [key, node] : *table) {
      const Field* f = find_field(section, key.str());
      if (!f) fail_config(origin, section + "." + std::string(key.str()), "unknown key");
      set_field(config, *f, node, origin);
    }
  }
  return config;
}

std::string read_config_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(path + ": cannot open config file");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void apply_each_override(JobConfig& config, const std::vector<std::string>& args) {
  for (const std::string& arg : args) {
    if (arg.rfind("--", 0) != 0) throw ConfigError("unexpected argument '" + arg + "'");
    apply_override(config, arg.substr(2));
  }
}

}  // namespace

JobConfig parse_job_config(std::string_view toml_text, const std::string& origin) {
  JobConfig config = parse_unvalidated(toml_text, origin);
  validate_job_config(config);
  return config;
}

JobConfig load_job_config(const std::string& path) { return parse_job_config(read_config_file(path), path); }

JobConfig load_job_config(const std::string& path, const std::vector<std::string>& overrides) {
  JobConfig config = parse_unvalidated(read_config_file(path), path);
  apply_each_override(config, overrides);
  validate_job_config(config);
  return config;
}

void apply_override(JobConfig& config, std::string_view assignment) {
  const std::string origin = "command line";
  auto eq = assignment.find('=');
  if (eq == std::string_view::npos) fail_config(origin, std::string(assignment), "expected --section.key=value");
  std::string name(assignment.substr(0, eq));
  std::string value(assignment.substr(eq + 1));
  auto dot = name.find('.');
  if (dot == std::string::npos) fail_config(origin, name, "expected --section.key=value");
  std::string section = name.substr(0, dot), key = name.substr(dot + 1);
  if (!section_exists(section)) fail_config(origin, name, "unknown section '" + section + "'");
  const Field* f = find_field(section, key);
  if (!f) fail_config(origin, name, "unknown key");
  toml::table parsed;
  bool is_toml = true;
  try {
    parsed = toml::parse("v = " + value);
  } catch (const toml::parse_error&) {
    is_toml = false;
  }
  const bool text = f->type == FieldType::String || f->type == FieldType::Enum;
  if (text && !(is_toml && parsed["v"].is_string())) {
    toml::value<std::string> raw(value);  // a bare word such as a path
    set_field(config, *f, raw, origin);
  } else {
    if (!is_toml) fail_config(origin, name, "cannot read value '" + value + "'");
    set_field(config, *f, *parsed.get("v"), origin);
  }
}

void apply_overrides(JobConfig& config, const std::vector<std::string>& args) {
  apply_each_override(config, args);
  validate_job_config(config);
}

std::string job_config_to_toml(const JobConfig& config) {
  JobConfig copy = config;
  std::string out, section;
  for (const auto& f : fields()) {
    if (f.section != section) {
      section = f.section;
      out += (out.empty() ? "[" : "\n[") + section + "]\n";
    }
    out += f.key + " = " + value_text(copy, f) + "\n";
  }
  return out;
}

std::string job_config_reference() {
  JobConfig defaults;
  std::ostringstream s;
  for (const auto& f : fields()) {
    std::string constraint = !f.choices.empty() ? "one of " + join(f.choices)
                             : (f.type == FieldType::Int || f.type == FieldType::Float || f.type == FieldType::IntList)
                                 ? "in " + f.range.text()
                                 : "";
    s << "  --" << f.name() << " (" << type_name(f.type) << ", default " << value_text(defaults, f) << ")  "
      << f.doc << (constraint.empty() ? "" : "; " + constraint) << "\n";
  }
  return s.str();
}

}  // namespace meshtrain
