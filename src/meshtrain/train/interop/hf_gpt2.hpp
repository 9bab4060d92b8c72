#pragma once
// Hugging Face GPT-2, both ways (docs/huggingface.md).
//
// meshtrain's GPT is GPT-2 (gpt.hpp): the same parameter names, Conv1D's
// (in, out) weight layout, the tanh GELU ("gelu_new"), layernorm eps 1e-5 and
// an output layer tied to wte. So the mapping is by name alone:
//   out   config.json (model_type gpt2, the sizes, dropouts 0, tied
//         embeddings) and model.safetensors with the tensors under
//         "transformer." + name, as GPT2LMHeadModel.save_pretrained writes
//         them (lm_head.weight is wte and is not stored);
//   in    a directory holding config.json and model.safetensors, or a
//         safetensors file alone; names with or without "transformer.",
//         the attention mask buffers (h.<i>.attn.bias, .masked_bias) and a
//         stored lm_head.weight skipped; F32, BF16 or F16 tensors.
// Only the dense GPT maps: GPT-2 has no mixture of experts.
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "meshtrain/checkpoint/flat_shards.hpp"
#include "meshtrain/core/param_store.hpp"
#include "meshtrain/train/config/job_config.hpp"

namespace meshtrain::interop {

// config.json for a GPT2LMHeadModel of the job's sizes.
nlohmann::json hf_gpt2_config(const ModelSection& model);

// Checks a config.json against the job's model: model_type, n_layer,
// n_embd, n_head, vocab_size, n_positions (= block_size), n_inner (4 n_embd
// or null), activation_function, layer_norm_epsilon and tied embeddings.
// CheckpointError naming `source`, the key, its value and the job's.
void check_hf_gpt2_config(const nlohmann::json& config, const ModelSection& model, const std::string& source);

// Writes out_dir/config.json and out_dir/model.safetensors (each atomically)
// from the parameters of the whole model (one process's store).
void export_hf_gpt2(const ModelSection& model, const ParamStore& whole, const std::filesystem::path& out_dir,
                    checkpoint::Dtype dtype = checkpoint::Dtype::F32);

// Where a Hugging Face GPT-2's weights are.
struct HfGpt2Source {
  std::filesystem::path weights;                // a safetensors file
  std::optional<std::filesystem::path> config;  // config.json beside it, when there is one
};
// `path` as a Hugging Face model: a directory with config.json (and
// model.safetensors, else a CheckpointError saying what is there instead),
// or a .safetensors file; nullopt for anything else (a meshtrain checkpoint).
std::optional<HfGpt2Source> find_hf_gpt2(const std::filesystem::path& path);

// The source's parameters in `whole`'s layout (the whole model of the job's
// config), checked before anything is read: the config against the job's, and
// every tensor by name and shape (a CheckpointError naming the tensor and
// both shapes, the missing and the unexpected ones).
std::unique_ptr<checkpoint::FlatRangeReader> open_hf_gpt2(const HfGpt2Source& source, const ModelSection& model,
                                                          const ParamStore& whole);

}  // namespace meshtrain::interop
