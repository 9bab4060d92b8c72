#pragma once
// ParamStore <-> safetensors: every view of a flat buffer in the store's
// layout becomes one F32 tensor named after the view (Hugging Face names for
// GPT), with the view's shape. Loading demands an exact match with the model:
// same names, same shapes, nothing missing, nothing extra.
//
// The same helpers save other buffers of the store's layout (optimizer
// state) under a prefix, e.g. "exp_avg." + view name, so one train-state file
// can hold several of them.
#include <filesystem>
#include <string_view>
#include <vector>

#include "meshtrain/checkpoint/safetensors_reader.hpp"
#include "meshtrain/checkpoint/safetensors_writer.hpp"
#include "meshtrain/core/bf16.hpp"
#include "meshtrain/core/param_store.hpp"

namespace meshtrain::checkpoint {

// Entries for every view of `flat` (flat_size() floats in the store's
// layout), named prefix + view name. `flat` must outlive the write.
std::vector<TensorEntry> view_tensors(const ParamStore& store, const float* flat, std::string_view prefix = "");

// Fills every view of `flat` from the tensors named prefix + view name. Only
// tensors whose names start with `prefix` are compared with the model (so
// other prefixes in the same file are ignored); any missing, extra or
// misshapen one is a CheckpointError listing the first few differences,
// raised before anything is written into `flat`.
void read_view_tensors(const SafetensorsReader& reader, const ParamStore& store, float* flat,
                       std::string_view prefix = "");
// Only the check of read_view_tensors: the same CheckpointError, nothing read.
// F32, BF16 and F16 tensors all pass: a read widens them to float.
void check_view_tensors(const SafetensorsReader& reader, const ParamStore& store, std::string_view prefix = "");

// The same entries narrowed to BF16 (rounded to nearest even) in `storage`,
// which must outlive the write.
std::vector<TensorEntry> bf16_tensors(std::span<const TensorEntry> f32, std::vector<Bf16>& storage);
// The model's parameters to/from one file; dtype F32 or BF16 (an export:
// checkpoints themselves keep the fp32 master weights).
void save_params(const ParamStore& store, const std::filesystem::path& path, const Metadata& metadata = {},
                 Dtype dtype = Dtype::F32);
void load_params(ParamStore& store, const std::filesystem::path& path);

}  // namespace meshtrain::checkpoint
