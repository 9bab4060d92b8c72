#pragma once
// Builds the model a job config names, with uninitialized parameters. With a
// tensor-parallel group, this rank's part of it (gpt.hpp, vit.hpp); with
// pipeline stages, the pieces of pipeline rank `stage`
// (parallel/pipeline/stage_split.hpp).
#include <cstdint>
#include <memory>
#include <vector>

#include "meshtrain/nn/model.hpp"
#include "meshtrain/nn/moe/expert_parallel.hpp"
#include "meshtrain/nn/moe/moe_config.hpp"
#include "meshtrain/nn/recompute.hpp"
#include "meshtrain/nn/tensor_parallel.hpp"
#include "meshtrain/train/config/job_config.hpp"

namespace meshtrain {

struct ModelLayout {
  nn::TensorParallelComm* tp = nullptr;
  nn::ExpertParallelComm* ep = nullptr;  // the rank's expert group; null: every expert
  int pipeline = 1, virtual_stages = 1, stage = 0;
  std::vector<int64_t> stage_layers{};  // empty: balanced
  nn::Recompute recompute = nn::Recompute::None;  // training.recompute
  Precision precision = Precision::Fp32;           // training.precision
  kernels::AttentionKernel attention = kernels::AttentionKernel::Auto;  // training.attention
  Device device{};                                 // training.device, opened (train/loop/training_device.hpp)
};

std::unique_ptr<Model> make_model(const ModelSection& model, nn::TensorParallelComm* tp = nullptr);
std::unique_ptr<Model> make_model(const ModelSection& model, const ModelLayout& layout);
// The layout of worker `stage` of a job's [parallel] section; the layers
// compute as `training` says (recomputation, precision, attention kernel),
// or by default when it is null.
ModelLayout model_layout(const ParallelSection& parallel, nn::TensorParallelComm* tp, int stage,
                         nn::ExpertParallelComm* ep = nullptr, const TrainingSection* training = nullptr,
                         const Device& device = {});
// The kernel the model's attention runs: training.attention, "auto" resolved
// at the model's context (a GPT's block_size, a ViT's patches); Auto for a
// model without attention.
kernels::AttentionKernel attention_kernel(const ModelSection& model, const TrainingSection& training);
// The [model] section's mixture-of-experts keys.
nn::MoeConfig gpt_moe_config(const ModelSection& model);

}  // namespace meshtrain
