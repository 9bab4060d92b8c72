// The job config's cross-key checks (validate_job_config): what each key's
// range cannot say alone, such as a mesh that must multiply out, heads and
// layers that must divide, and strategies that do not combine. Parsing and
// the keys themselves are in config_schema.cpp.
#include <string>

#include "meshtrain/core/device.hpp"
#include "meshtrain/core/enum_names.hpp"
#include "meshtrain/core/error.hpp"
#include "meshtrain/parallel/pipeline/stage_split.hpp"
#include "meshtrain/train/config/config_schema.hpp"

namespace meshtrain {

namespace {

// What tensor parallelism splits must split evenly: heads (and so the MLP's
// 4 n_embd units) and the vocabulary (no padding: a padded vocabulary would
// change the model's shapes and its Hugging Face checkpoint).
void validate_tensor_parallel(const JobConfig& c, const std::string& origin) {
  const int64_t t = c.parallel.tensor;
  if (c.parallel.sequence_parallel) {
    if (t == 1) fail_config(origin, "parallel.sequence_parallel", "splits the tokens over tensor ranks: set parallel.tensor > 1");
    if (c.model.kind != ModelKind::Gpt)
      fail_config(origin, "parallel.sequence_parallel", "is built for model.kind = \"gpt\"");
    const int64_t tokens = c.training.batch_size / c.parallel.micro_batches * c.model.block_size;
    if (tokens % t != 0)
      fail_config(origin, "parallel.sequence_parallel", "a micro-batch's " + std::to_string(tokens) +
                                                     " tokens (batch x block_size) do not split over parallel.tensor = " +
                                                     std::to_string(t) + " ways");
  }
  if (t == 1) return;
  const std::string ways = " over parallel.tensor = " + std::to_string(t) + " ways";
  if (c.model.kind == ModelKind::Mlp)
    fail_config(origin, "parallel.tensor", "tensor parallelism splits transformer blocks: model.kind 'gpt' or 'vit', not '" +
                                        enum_string(c.model.kind) + "'");
  if (c.parallel.data == DataParallelism::ParameterServer)
    fail_config(origin, "parallel.tensor", "parameter-server workers train alone; tensor parallelism needs parallel.data = "
                                    "\"allreduce\" (or \"none\" with parallel.workers = parallel.tensor)");
  // parallel.workers is what `meshtrain run` starts (1 by default, when
  // another launcher decides); the mesh checks the launched world again.
  if (c.parallel.workers > 1 && c.parallel.workers % t != 0)
    fail_config(origin, "parallel.tensor", "parallel.workers = " + std::to_string(c.parallel.workers) +
                                        " is not a multiple of parallel.tensor = " + std::to_string(t) +
                                        " (workers = data ways x tensor ways)");
  if (c.parallel.data == DataParallelism::None && c.parallel.workers > 1 && c.parallel.workers != t * c.parallel.pipeline)
    fail_config(origin, "parallel.tensor", "parallel.data = \"none\" allows one data-parallel way, but parallel.workers = " +
                                        std::to_string(c.parallel.workers) + " / (tensor " + std::to_string(t) +
                                        " x pipeline " + std::to_string(c.parallel.pipeline) + ") = " +
                                        std::to_string(c.parallel.workers / (t * c.parallel.pipeline)));
  if (c.model.n_head % t != 0)
    fail_config(origin, "parallel.tensor", "model.n_head = " + std::to_string(c.model.n_head) + " heads do not split" + ways);
  if (c.model.kind == ModelKind::Gpt && c.model.vocab_size % t != 0)
    fail_config(origin, "parallel.tensor", "model.vocab_size = " + std::to_string(c.model.vocab_size) +
                                        " does not split" + ways + " (the embedding is vocabulary-parallel)");
  // Each tensor rank's data-parallel group gets its own share of the reducers.
  if (c.parallel.all_reduce == comm::AllReduceAlgorithm::ReductionServer && c.parallel.reducers % t != 0)
    fail_config(origin, "parallel.reducers", std::to_string(c.parallel.reducers) + " reducers do not split among the " +
                                          std::to_string(t) + " data-parallel groups of parallel.tensor = " +
                                          std::to_string(t) + " (one share per tensor rank)");
}

// A pipeline splits a GPT's layers; its schedule must exist for the stages
// and micro-batches, and the strategies around it must compose with it.
void validate_pipeline(const JobConfig& c, const std::string& origin) {
  namespace pp = parallel::pipeline;
  const int64_t P = c.parallel.pipeline, V = c.parallel.virtual_stages, M = c.parallel.micro_batches;
  if (P == 1) {
    if (V > 1) fail_config(origin, "parallel.virtual_stages", "chunks pipeline stages: set parallel.pipeline > 1");
    if (!c.parallel.stage_layers.empty())
      fail_config(origin, "parallel.stage_layers", "splits pipeline stages: set parallel.pipeline > 1");
    return;
  }
  const std::string key = "parallel.pipeline";
  if (c.model.kind != ModelKind::Gpt)
    fail_config(origin, key, "pipeline stages split a GPT's layers, not model.kind = '" + enum_string(c.model.kind) + "'");
  if (c.parallel.data == DataParallelism::ParameterServer)
    fail_config(origin, key, "parameter-server workers train alone; a pipeline needs parallel.data = \"allreduce\" or \"none\"");
  // ZeRO-2/3 reduce-scatter a block's gradient as its backward ends, and a
  // rank's first backward must reach every block (it replaces the shard).
  if (c.parallel.zero_stage >= 2 && c.parallel.schedule == pp::ScheduleKind::ZeroBubble)
    fail_config(origin, key, "ZeRO stages 2 and 3 reduce-scatter each block's gradient as its backward ends, before "
                      "zero_bubble's deferred weight half has added to it; use zero_stage = 0 or 1 with zero_bubble, "
                      "or gpipe or 1f1b");
  if (c.parallel.zero_stage >= 2 && V > 1)
    fail_config(origin, key, "ZeRO stages 2 and 3 with several chunks per rank are not supported (a rank's first backward "
                      "reaches one chunk only); use zero_stage = 0 or 1 with interleaved, or gpipe or 1f1b");
  if (c.parallel.all_reduce == comm::AllReduceAlgorithm::ReductionServer)
    fail_config(origin, key, "the Reduction Server does not serve pipeline jobs yet; choose another parallel.all_reduce");
  if (c.parallel.schedule != pp::ScheduleKind::Interleaved && V > 1)
    fail_config(origin, "parallel.virtual_stages", std::to_string(V) + " chunks per rank need schedule = \"interleaved\"");
  if (c.parallel.schedule == pp::ScheduleKind::ZeroBubble && c.parallel.sequence_parallel)
    fail_config(origin, "parallel.schedule", "zero_bubble defers weight gradients, which needs the gathered inputs that "
                                      "sequence parallelism reuses: turn one of them off");
  const int64_t ways = P * c.parallel.tensor;
  if (c.parallel.workers > 1 && c.parallel.workers % ways != 0)
    fail_config(origin, key, "parallel.workers = " + std::to_string(c.parallel.workers) + " is not a multiple of pipeline " +
                          std::to_string(P) + " x tensor " + std::to_string(c.parallel.tensor) +
                          " (workers = data x tensor x pipeline ways)");
  if (c.parallel.data == DataParallelism::None && c.parallel.workers > 1 && c.parallel.workers != ways)
    fail_config(origin, key, "parallel.data = \"none\" allows one data-parallel way, but parallel.workers = " +
                          std::to_string(c.parallel.workers) + " / (tensor " + std::to_string(c.parallel.tensor) +
                          " x pipeline " + std::to_string(P) + ") = " + std::to_string(c.parallel.workers / ways));
  try {
    pp::make_schedule(c.parallel.schedule, static_cast<int>(P), static_cast<int>(M), static_cast<int>(V));
    pp::stage_layer_counts(c.model.n_layer, static_cast<int>(P * V), c.parallel.stage_layers);
  } catch (const ConfigError& e) {
    fail_config(origin, key, std::string(e.what()) + " (pipeline " + std::to_string(P) + ", micro_batches " +
                          std::to_string(M) + ", virtual_stages " + std::to_string(V) + ", model.n_layer " +
                          std::to_string(c.model.n_layer) + ")");
  }
}

// Mixture of experts and its expert parallelism.
void validate_experts(const JobConfig& c, const std::string& origin) {
  const auto& m = c.model;
  const int64_t X = c.parallel.expert;
  if (m.n_expert > 1) {
    if (m.kind != ModelKind::Gpt) fail_config(origin, "model.n_expert", "mixtures of experts are built for model.kind = \"gpt\"");
    if (m.top_k > m.n_expert)
      fail_config(origin, "model.top_k", std::to_string(m.top_k) + " experts per token, but model.n_expert = " +
                                      std::to_string(m.n_expert));
    if (c.parallel.sequence_parallel)
      fail_config(origin, "parallel.sequence_parallel", "a mixture of experts routes whole tokens: turn sequence "
                                                 "parallelism off with model.n_expert > 1");
    if (m.expert_bias_rate > 0 && c.parallel.zero_stage > 0)
      fail_config(origin, "model.expert_bias_rate", "the routing bias is moved on every rank after the update, which "
                                             "ZeRO's sharded update does not reach: use zero_stage = 0");
  }
  if (X == 1) return;
  if (m.n_expert == 1) fail_config(origin, "parallel.expert", "expert parallelism needs model.n_expert > 1");
  if (m.n_expert % X != 0)
    fail_config(origin, "parallel.expert", "model.n_expert = " + std::to_string(m.n_expert) + " experts do not split over " +
                                        std::to_string(X) + " expert-parallel ways");
  if (c.parallel.data != DataParallelism::AllReduce)
    fail_config(origin, "parallel.expert", "expert ways are carved out of the data-parallel ways: it needs parallel.data = "
                                    "\"allreduce\", not '" + enum_string(c.parallel.data) + "'");
  const int64_t model_ways = c.parallel.tensor * c.parallel.pipeline;
  if (c.parallel.workers > 1 && (c.parallel.workers % model_ways != 0 || (c.parallel.workers / model_ways) % X != 0))
    fail_config(origin, "parallel.expert", std::to_string(X) + " expert ways do not divide the " +
                                        std::to_string(c.parallel.workers / std::max<int64_t>(1, model_ways)) +
                                        " data-parallel ways (workers " + std::to_string(c.parallel.workers) +
                                        " / tensor " + std::to_string(c.parallel.tensor) + " / pipeline " +
                                        std::to_string(c.parallel.pipeline) + ")");
  if (c.parallel.zero_stage > 0)
    fail_config(origin, "parallel.expert", "ZeRO shards the flat parameter layout over all data ranks, whose expert "
                                    "tensors differ under expert parallelism: use zero_stage = 0 with expert > 1");
  if (c.parallel.all_reduce == comm::AllReduceAlgorithm::ReductionServer)
    fail_config(origin, "parallel.expert", "the Reduction Server reduces one gradient layout for every worker; expert "
                                    "gradients are reduced over their own ranks: choose another parallel.all_reduce");
}

}  // namespace

void validate_job_config(const JobConfig& c) {
  const std::string origin = "config";
  const auto& m = c.model;
  if (m.kind != ModelKind::Mlp) {
    if (m.n_embd % m.n_head != 0)
      fail_config(origin, "model.n_head", "n_head " + std::to_string(m.n_head) + " does not divide n_embd " +
                                       std::to_string(m.n_embd));
  }
  if (m.kind == ModelKind::Vit && m.image_size % m.patch_size != 0)
    fail_config(origin, "model.patch_size", "patch_size " + std::to_string(m.patch_size) + " does not divide image_size " +
                                         std::to_string(m.image_size));
  // GPT reads text or token files; the image models read Fashion-MNIST.
  const bool gpt_data = c.data.kind == DataKind::Text || c.data.kind == DataKind::Tokens;
  if (m.kind == ModelKind::Gpt ? !gpt_data : c.data.kind != DataKind::FashionMnist)
    fail_config(origin, "data.kind", "model '" + enum_string(m.kind) + "' trains on data.kind = " +
                                  (m.kind == ModelKind::Gpt ? "\"text\" or \"tokens\"" : "\"fashion_mnist\"") +
                                  ", not '" + enum_string(c.data.kind) + "'");
  if (m.kind == ModelKind::Gpt && c.data.kind == DataKind::Text && m.vocab_size < 256)
    fail_config(origin, "model.vocab_size", std::to_string(m.vocab_size) + " is too small for data.kind = \"text\": "
                                     "bytes need 256");
  if (c.data.kind == DataKind::Tokens && c.data.train_path.empty())
    fail_config(origin, "data.train_path", "token data (data.kind = \"tokens\") needs a train file");
  if (c.data.kind == DataKind::FashionMnist && m.kind == ModelKind::Vit && m.image_size != 28)
    fail_config(origin, "model.image_size", "Fashion-MNIST images are 28x28, not " + std::to_string(m.image_size));
  if (c.data.kind == DataKind::Text && c.data.path.empty()) fail_config(origin, "data.path", "a text dataset needs a path");
  if (c.schedule.decay != LrDecay::Constant && c.schedule.warmup_steps >= c.training.steps)
    fail_config(origin, "schedule.warmup_steps", "warmup of " + std::to_string(c.schedule.warmup_steps) +
                                              " steps must be shorter than training.steps (" +
                                              std::to_string(c.training.steps) + ") to leave room for decay");
  if (c.training.out_dir.empty()) fail_config(origin, "training.out_dir", "must not be empty");
  try {
    parse_device(c.training.device);
  } catch (const ConfigError& e) {
    fail_config(origin, "training.device", e.what());
  }
  if (c.parallel.reduce_dtype == Precision::Bf16 && c.parallel.data == DataParallelism::ParameterServer)
    fail_config(origin, "parallel.reduce_dtype", "parameter servers exchange fp32 gradients and parameters; bf16 is for "
                                                 "parallel.data = \"allreduce\"");
  if (c.parallel.zero_stage > 0 && c.parallel.data != DataParallelism::AllReduce)
    fail_config(origin, "parallel.zero_stage", "ZeRO shards data-parallel workers: it needs parallel.data = \"allreduce\", not '" +
                                            enum_string(c.parallel.data) + "'");
  if (c.parallel.zero_stage >= 2 && c.parallel.all_reduce == comm::AllReduceAlgorithm::ReductionServer)
    fail_config(origin, "parallel.zero_stage", "stages 2 and 3 reduce-scatter gradients among the workers; the Reduction "
                                        "Server serves all-reduces only (use zero_stage = 1, or another all_reduce)");
  if (c.training.batch_size % c.parallel.micro_batches != 0)
    fail_config(origin, "parallel.micro_batches", std::to_string(c.parallel.micro_batches) +
                                               " micro-batches do not divide training.batch_size (" +
                                               std::to_string(c.training.batch_size) + ")");
  if (c.parallel.micro_batches > 1 && c.parallel.data == DataParallelism::ParameterServer)
    fail_config(origin, "parallel.micro_batches", "parameter-server workers push every batch's gradient as it is; "
                                           "micro-batches are for data = \"none\" or \"allreduce\"");
  if (!c.model.init_from.empty() && c.parallel.data == DataParallelism::ParameterServer)
    fail_config(origin, "model.init_from", "parameter servers initialize their shards from training.seed; starting them "
                                    "from a trained model is not supported yet (use data = \"allreduce\")");
  validate_tensor_parallel(c, origin);
  validate_pipeline(c, origin);
  validate_experts(c, origin);
  if (c.parallel.all_reduce == comm::AllReduceAlgorithm::ReductionServer && c.parallel.data != DataParallelism::AllReduce)
    fail_config(origin, "parallel.all_reduce", "reduction_server needs parallel.data = \"allreduce\", not '" +
                                            enum_string(c.parallel.data) + "'");
}

}  // namespace meshtrain
