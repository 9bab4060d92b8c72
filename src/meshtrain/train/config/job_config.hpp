#pragma once
// A training job's configuration: one struct per TOML section. Defaults here
// are the documented defaults; config_schema.cpp lists every key with its
// type, range and meaning, and is the only place that reads TOML. A key with
// a fixed set of values is an enum whose name table (core/enum_names.hpp)
// the schema parses and prints with.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "meshtrain/comm/bootstrap/transport_kind.hpp"
#include "meshtrain/comm/device/device_collectives_kind.hpp"
#include "meshtrain/comm/collectives/algorithm.hpp"
#include "meshtrain/core/enum_names.hpp"
#include "meshtrain/core/precision.hpp"
#include "meshtrain/data/dataset.hpp"
#include "meshtrain/data/sampler.hpp"
#include "meshtrain/kernels/attention_kernel.hpp"
#include "meshtrain/nn/recompute.hpp"
#include "meshtrain/optim/config.hpp"
#include "meshtrain/optim/schedule.hpp"
#include "meshtrain/parallel/pipeline/schedule.hpp"

namespace meshtrain {

enum class ModelKind { Gpt, Mlp, Vit };
inline constexpr EnumName<ModelKind> kModelKindNames[] = {
    {ModelKind::Gpt, "gpt"}, {ModelKind::Mlp, "mlp"}, {ModelKind::Vit, "vit"}};
constexpr std::span<const EnumName<ModelKind>> enum_names(ModelKind) { return kModelKindNames; }

// How workers share the training: not at all, synchronous all-reduce (and
// ZeRO), or asynchronous parameter servers.
enum class DataParallelism { None, AllReduce, ParameterServer };
inline constexpr EnumName<DataParallelism> kDataParallelismNames[] = {
    {DataParallelism::None, "none"},
    {DataParallelism::AllReduce, "allreduce"},
    {DataParallelism::ParameterServer, "parameter_server"}};
constexpr std::span<const EnumName<DataParallelism>> enum_names(DataParallelism) { return kDataParallelismNames; }

struct ModelSection {
  ModelKind kind = ModelKind::Gpt;
  // gpt and vit
  int64_t n_layer = 4;
  int64_t n_embd = 256;
  int64_t n_head = 4;
  // gpt
  int64_t block_size = 128;  // context length T
  int64_t vocab_size = 256;  // byte-level; token files: above every id
  // gpt, mixture of experts (nn/moe/moe_config.hpp)
  int64_t n_expert = 1;          // 1: dense MLPs
  int64_t top_k = 2;
  int64_t moe_every = 1;
  double capacity_factor = 0;    // 0: dropless
  double aux_loss_coef = 1e-2;
  double z_loss_coef = 0;
  double expert_bias_rate = 0;   // auxiliary-loss-free balancing; 0: off
  // mlp
  std::vector<int64_t> hidden = {256, 128};
  // mlp and vit
  int64_t classes = 10;
  // vit
  int64_t image_size = 28;
  int64_t patch_size = 7;
  // Starting parameters: a Hugging Face GPT-2 or a meshtrain checkpoint
  // (train/loop/init_from.hpp); empty: random from training.seed.
  std::string init_from;
};

struct DataSection {
  DataKind kind = DataKind::Text;
  std::string path = "data/kjv.txt";
  double val_fraction = 0.05;
  int64_t seed = 1234;
  // kind = tokens (docs/tokenized_data.md)
  std::string train_path;  // a .bin of token ids: nanoGPT's raw uint16 or llm.c's
  std::string val_path;    // empty: the last val_fraction of train_path
  std::string tokenizer;   // what made them; generate encodes and decodes with it
  SampleOrder order = SampleOrder::Random;
};

struct TrainingSection {
  int64_t batch_size = 8;  // per device
  int64_t steps = 200;
  int64_t seed = 42;
  int64_t threads = 0;  // 0: all cores
  int64_t log_every = 10;
  int64_t eval_every = 100;  // 0: only at the end
  int64_t eval_batches = 20;
  std::string out_dir = "runs/default";
  double max_memory_mb = 0;  // per-rank limit on tracked memory; 0: none
  double peak_tflops = 0;    // one device's peak for the metrics' mfu; 0: a GPU's datasheet figure, none on a CPU
  nn::Recompute recompute = nn::Recompute::None;
  Precision precision = Precision::Fp32;  // the matrix products' operands (core/precision.hpp)
  kernels::AttentionKernel attention = kernels::AttentionKernel::Auto;  // kernels/attention_kernel.hpp
  std::string device = "cpu";             // "cpu", "cuda" or "cuda:N" (core/device.hpp)
  // Divergence (docs/long-jobs.md): steps whose update is skipped.
  std::string skip_steps;        // "1200-1250, 3000": these steps read their batch and leave the model as it is
  double spike_sigma = 0;        // > 0: skip an update whose loss or gradient norm exceeds mean + this x sigma
  int64_t spike_window = 128;    // ... of the last this many updates taken
  int64_t check_replicas_every = 0;  // > 0: compare a hash of the replicas' parameters every N steps
};

struct OptimizerSection {
  OptimizerKind name = OptimizerKind::AdamW;
  double lr = 3e-4;
  double weight_decay = 0.1;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double momentum = 0.9;
  bool nesterov = false;
  double trust_coefficient = 0.001;
  double grad_clip = 1.0;  // 0: no clipping
};

struct ScheduleSection {
  int64_t warmup_steps = 0;
  LrDecay decay = LrDecay::Cosine;
  double min_lr_ratio = 0.1;
  ScaleRule scale_rule = ScaleRule::None;
  int64_t reference_batch = 0;  // batch the lr was tuned for; 0: the per-device batch
};

struct CheckpointSection {
  std::string dir;    // empty: <training.out_dir>/checkpoints
  int64_t every = 0;  // 0: only at the end
  int64_t keep = 3;
  bool async = true;  // snapshot in memory, write on a thread; at most one in flight
};

struct MetricsSection {
  std::string path;   // empty: <training.out_dir>/metrics.jsonl
  std::string trace;  // Chrome/Perfetto trace JSON of the last step's pipeline actions, every rank; empty: none
  bool tensorboard = false;  // the metrics as TensorBoard event files in <training.out_dir>/tb too
  int64_t prometheus_port = 0;                     // > 0: the lead serves /metrics and /healthz here; 0: off
  std::string prometheus_address = "127.0.0.1";    // the address it listens on
};

// How the job spreads over processes. `meshtrain run` starts the pools named
// here (workers, reducers, parameter servers, evaluators); every worker reads
// its rank and peers from its launch environment.
struct ParallelSection {
  DataParallelism data = DataParallelism::None;
  comm::AllReduceAlgorithm all_reduce = comm::AllReduceAlgorithm::Auto;
  int64_t zero_stage = 0;            // ZeRO: 0 none, 1 optimizer state, 2 + gradients, 3 + parameters
  double bucket_mb = 25;             // gradient bucket size for the overlapped all-reduce
  Precision reduce_dtype = Precision::Fp32;  // what crosses the wire: gradients, ZeRO-3's gathers, tp/pp/ep activations
  int64_t micro_batches = 1;         // gradient accumulation: training.batch_size in this many micro-batches
  int64_t tensor = 1;                // tensor-parallel ways; data ways = workers / tensor (comm/mesh/device_mesh.hpp)
  bool sequence_parallel = false;    // tensor > 1: layernorm regions split along the tokens (Megatron-SP)
  int64_t pipeline = 1;              // pipeline stages; workers = data x tensor x pipeline ways
  parallel::pipeline::ScheduleKind schedule = parallel::pipeline::ScheduleKind::OneFOneB;
  int64_t virtual_stages = 1;        // model chunks per pipeline rank (schedule = interleaved)
  std::vector<int64_t> stage_layers; // layers per virtual stage; empty: balanced
  int64_t expert = 1;                // expert-parallel ways, carved out of the data-parallel ways
  comm::TransportKind transport = comm::TransportKind::Auto;
  // What carries the collectives of workers on GPUs: NCCL or the host-staged path.
  comm::DeviceCollectivesKind device_collectives = comm::DeviceCollectivesKind::Auto;
  double timeout_s = 300;            // longest wait for a peer before the job fails
  int64_t workers = 1;               // worker processes `meshtrain run` starts
  int64_t reducers = 0;              // reducer processes (all_reduce = reduction_server)
  int64_t servers = 1;               // parameter servers (data = parameter_server)
  int64_t max_staleness = -1;        // parameter server: steps a worker may run ahead of the slowest; -1: unbounded
  int64_t evaluators = 0;            // evaluator processes: evaluate each new checkpoint
  int64_t max_restarts = 3;          // `meshtrain run`: restarts of a dead PS worker alone, or of the whole job
  double restart_backoff_s = 1;      // wait before the first whole-job restart; doubles per restart, at most 30 s
  double heartbeat_timeout_s = 0;    // a worker silent this long is hung: killed and restarted; 0: off
  double stop_grace_s = 25;          // `meshtrain run`: SIGTERM to the workers -> SIGKILL after this long
};

struct JobConfig {
  ModelSection model;
  DataSection data;
  TrainingSection training;
  OptimizerSection optimizer;
  ScheduleSection schedule;
  CheckpointSection checkpoint;
  MetricsSection metrics;
  ParallelSection parallel;

  std::string checkpoint_dir() const;
  std::string metrics_path() const;
  std::string tensorboard_dir() const;  // <training.out_dir>/tb
};

}  // namespace meshtrain
