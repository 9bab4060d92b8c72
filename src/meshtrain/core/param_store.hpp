#pragma once
// All parameters of a model in one contiguous fp32 buffer, their gradients in
// another of the same layout. Each tensor is a named view (offset, shape).
// Data-parallel buckets, ZeRO shards and checkpoints are ranges and views of
// these two buffers; no strategy copies parameters into a layout of its own.
//
// Life cycle: a model declares every tensor, then calls allocate() once.
#include <cstddef>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "meshtrain/core/aligned_buffer.hpp"
#include "meshtrain/core/shape.hpp"

namespace meshtrain {

struct ParamView {
  std::string name;    // e.g. "h.0.attn.c_attn.weight" (Hugging Face GPT-2 names for GPT)
  Shape shape;
  size_t offset = 0;   // in elements, into the flat buffers
  size_t numel = 0;
  bool weight_decay = true;  // false for biases, norms (AdamW's usual exclusion)
};

class ParamStore {
 public:
  // Each view starts on a 16-element (64-byte) boundary so kernels see aligned rows.
  static constexpr size_t kAlignElems = 16;

  // Declares a tensor; returns its index. Only before allocate().
  size_t declare(std::string name, Shape shape, bool weight_decay);
  // Allocates both buffers (zeroed). Only once.
  void allocate();
  bool allocated() const { return allocated_; }

  float* param(size_t index) { return params_.data() + views_[index].offset; }
  const float* param(size_t index) const { return params_.data() + views_[index].offset; }
  float* grad(size_t index) { return grads_.data() + views_[index].offset; }
  const float* grad(size_t index) const { return grads_.data() + views_[index].offset; }

  std::span<float> params() { return params_.span(); }
  std::span<const float> params() const { return params_.span(); }
  std::span<float> grads() { return grads_.span(); }
  std::span<const float> grads() const { return grads_.span(); }
  void zero_grads() { grads_.zero(); }

  // Backward announces each tensor whose gradient is final for this step, so
  // data parallelism can send it while the rest of backward runs. Only a
  // hint: a tensor never announced is treated as ready when backward returns.
  void set_grad_ready_hook(std::function<void(size_t index)> hook) { grad_ready_hook_ = std::move(hook); }
  void grad_ready(size_t index) {
    if (grad_ready_hook_) grad_ready_hook_(index);
  }

  const std::vector<ParamView>& views() const { return views_; }
  const ParamView& view(size_t index) const { return views_[index]; }
  // The view with this name, or nullptr.
  const ParamView* find(std::string_view name) const;
  // Sum of numel over views (excludes alignment padding).
  size_t parameter_count() const;
  // Size of each flat buffer in elements, padding included.
  size_t flat_size() const { return flat_size_; }

 private:
  std::vector<ParamView> views_;
  std::unordered_map<std::string, size_t> by_name_;
  size_t flat_size_ = 0;
  bool allocated_ = false;
  AlignedBuffer<float> params_{MemoryKind::Parameters};
  AlignedBuffer<float> grads_{MemoryKind::Gradients};
  std::function<void(size_t)> grad_ready_hook_;
};

}  // namespace meshtrain
