#include "meshtrain/train/engine/memory_budget.hpp"

#include <algorithm>
#include <cstdio>

#include "meshtrain/core/activation_memory.hpp"
#include "meshtrain/core/device.hpp"
#include "meshtrain/core/error.hpp"
#include "meshtrain/core/memory.hpp"
#include "meshtrain/nn/gpt.hpp"
#include "meshtrain/parallel/zero/shard_layout.hpp"
#include "meshtrain/train/engine/model_factory.hpp"

namespace meshtrain {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

std::string mib(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", bytes / kMiB);
  return text;
}

}  // namespace

int optimizer_state_floats(const OptimizerConfig& o) {
  if (o.kind == OptimizerKind::AdamW || o.kind == OptimizerKind::Lamb) return 2;
  return o.momentum != 0 ? 1 : 0;  // sgd, lars
}

MemoryPrediction predict_memory(const ParamStore& store, int world, int stage, int state_floats,
                                int64_t micro_batches) {
  const size_t flat = store.flat_size() * sizeof(float);
  MemoryPrediction p{.parameters = flat, .gradients = flat, .optimizer_state = flat * size_t(state_floats)};
  if (stage == 0 || world <= 1) return p;
  const parallel::ShardLayout layout(store, 0, world);
  const size_t shard = layout.local_size() * sizeof(float);
  const size_t block = layout.max_gathered_size(false) * sizeof(float);
  const size_t whole_step = layout.whole_step_gathered_size() * sizeof(float);
  const size_t any_unit = std::max(block, layout.max_gathered_size(true) * sizeof(float));
  p.optimizer_state = shard * size_t(state_floats);
  if (stage >= 2) p.gradients = micro_batches > 1 ? 2 * shard : shard;
  if (stage >= 3) p.parameters = shard;
  // param_gatherer.hpp and grad_reducer.hpp: two gather (staging) buffers
  // of the largest block, plus every whole-step unit's.
  const size_t gatherer = stage >= 3 ? 2 * block + whole_step : 2 * any_unit;
  const size_t reducer = stage >= 2 ? 2 * block + whole_step : 0;
  p.communication = gatherer + reducer;
  return p;
}

void check_memory_budget(double max_memory_mb, const StepSettings& step, const ParamStore& store, int world) {
  const double limit = max_memory_mb * kMiB;
  if (limit <= 0) return;
  const int stage = world > 1 ? step.zero_stage : 0;
  const int k = optimizer_state_floats(step.optimizer);
  const int64_t m = step.micro_batches;
  const MemoryPrediction p = predict_memory(store, world, stage, k, m);
  if (double(p.total()) <= limit) return;
  std::string advice;
  for (int s = stage + 1; s <= 3 && world > 1 && advice.empty(); ++s)
    if (double(predict_memory(store, world, s, k, m).total()) <= limit)
      advice = "; it fits at parallel.zero_stage = " + std::to_string(s) + " (" +
               mib(double(predict_memory(store, world, s, k, m).total())) + ")";
  if (advice.empty())
    advice = world > 1 ? "; it does not fit at any ZeRO stage on " + std::to_string(world) +
                             " workers (stage 3 needs " + mib(double(predict_memory(store, world, 3, k, m).total())) +
                             "): add workers or raise the limit"
                       : "; with one worker nothing can be sharded: add workers (parallel.workers) and set "
                         "parallel.zero_stage";
  throw ConfigError("training.max_memory_mb: the model does not fit in " + mib(limit) + " per rank at ZeRO stage " +
                    std::to_string(stage) + " on " + std::to_string(world) + " worker" + (world == 1 ? "" : "s") +
                    ": parameters " + mib(double(p.parameters)) + " + gradients " + mib(double(p.gradients)) +
                    " + optimizer state " + mib(double(p.optimizer_state)) + " + communication buffers " +
                    mib(double(p.communication)) + " = " + mib(double(p.total())) + advice);
}

void check_memory_peak(double max_memory_mb, int64_t step, const MemoryTracker& tracker) {
  const double limit = max_memory_mb * kMiB;
  if (limit <= 0 || double(tracker.peak_total()) <= limit) return;
  std::string kinds;
  for (size_t k = 0; k < kMemoryKindCount; ++k) {
    const auto kind = static_cast<MemoryKind>(k);
    if (tracker.peak(kind) == 0) continue;
    kinds += (kinds.empty() ? "" : ", ") + std::string(memory_kind_name(kind)) + " " + mib(double(tracker.peak(kind)));
  }
  throw Error("step " + std::to_string(step) + ": tracked memory peaked at " + mib(double(tracker.peak_total())) +
              " per rank, over training.max_memory_mb (" + mib(limit) + "): " + kinds +
              "; a higher parallel.zero_stage or a smaller training.batch_size needs less");
}

size_t predict_activations(const ModelSection& m, const ParallelSection& p, const TrainingSection& training) {
  if (m.kind != ModelKind::Gpt || p.pipeline > 1 || m.n_expert > 1 || p.sequence_parallel) return 0;
  const double t = double(p.tensor), b = double(training.batch_size / std::max<int64_t>(p.micro_batches, 1));
  const auto mode = static_cast<ActivationRecompute>(training.recompute);  // the same three, in order
  const bool bf16 = training.precision == Precision::Bf16;  // meshtrain's bf16 (activation_memory.hpp)
  // Gpt's fused classifier: bf16 without a vocabulary split (nn/gpt.hpp).
  const bool fused_classifier = bf16 && p.tensor == 1;
  const double vocab = double(m.vocab_size);
  const double classifier_rows = std::min(double(m.block_size) * b, double(Gpt::kClassifierRows));
  return static_cast<size_t>(activation_bytes({.seq = double(m.block_size),
                                               .micro_batch = b,
                                               .hidden = double(m.n_embd),
                                               .heads = double(m.n_head),
                                               .layers = double(m.n_layer),
                                               .head_floats = double(m.block_size) * b * double(m.vocab_size) / t,
                                               .tensor = t,
                                               .act_bytes = bf16 ? 2.0 : 4.0,
                                               .extra_experts = 0,
                                               .dropout = false,
                                               .residual_bytes = 4,
                                               .gradient_bytes = 4,
                                               .mixed_copies = bf16,
                                               .flash_attention = attention_kernel(m, training) ==
                                                                  kernels::AttentionKernel::Flash,
                                               .head_chunk_floats = fused_classifier ? classifier_rows * vocab : 0},
                                              mode));
}

std::string memory_report(const MemoryPrediction& predicted, int world, int stage, const Device& device) {
  const auto& tracker = MemoryTracker::of(device);
  std::string out = "memory per rank" + (device.is_cpu() ? std::string() : " on " + device_name(device)) +
                    " (ZeRO stage " + std::to_string(stage) + ", " + std::to_string(world) + " worker" +
                    (world == 1 ? "" : "s") + "): peak measured / predicted\n";
  auto row = [&](MemoryKind kind, const std::string& prediction) {
    char line[160];
    std::snprintf(line, sizeof line, "  %-16s %12.2f MiB   %s\n", std::string(memory_kind_name(kind)).c_str(),
                  double(tracker.peak(kind)) / kMiB, prediction.c_str());
    out += line;
  };
  row(MemoryKind::Parameters, mib(double(predicted.parameters)));
  row(MemoryKind::Gradients, mib(double(predicted.gradients)));
  row(MemoryKind::OptimizerState, mib(double(predicted.optimizer_state)));
  row(MemoryKind::Communication, mib(double(predicted.communication)));
  row(MemoryKind::Activations, predicted.activations ? mib(double(predicted.activations)) + " (formula)"
                                                    : "(depends on the batch)");
  row(MemoryKind::WeightCopies, "(bf16 products)");
  row(MemoryKind::Data, "");
  row(MemoryKind::Other, "");
  char total[160];
  std::snprintf(total, sizeof total, "  %-16s %12.2f MiB\n", "total", double(tracker.peak_total()) / kMiB);
  out += total;
  if (!device.is_cpu()) {  // what stays on the host: the data, staging, the loss's host rows
    std::snprintf(total, sizeof total, "  %-16s %12.2f MiB   (host memory, every kind)\n", "host",
                  double(MemoryTracker::global().peak_total()) / kMiB);
    out += total;
  }
  return out;
}

}  // namespace meshtrain
