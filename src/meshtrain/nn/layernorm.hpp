#pragma once
// Layer normalization over the last dim, with learned weight and bias.
// Layer conventions: see linear.hpp (owns its output; backward adds into
// parameter gradients and writes dinp).
//
// Under sequence parallelism (tensor_parallel.hpp) a rank normalizes its rows
// only, so its weight and bias gradients are partial: backward computes its
// rows' contribution into a scratch, sums that over the group and only then
// adds it to the gradients and announces them (grad_ready starts their
// data-parallel reduction; summing the gradient in place instead would also
// multiply what earlier micro-batches accumulated).
#include <cstdint>
#include <string>

#include "meshtrain/core/device_array.hpp"
#include "meshtrain/nn/backend.hpp"
#include "meshtrain/core/param_store.hpp"
#include "meshtrain/nn/recompute.hpp"
#include "meshtrain/nn/tensor_parallel.hpp"

namespace meshtrain::nn {

class LayerNorm {
 public:
  // Declares "<prefix>.weight" and "<prefix>.bias" (C), neither weight-decayed.
  // tp: the group whose sequence parallelism shards this norm's rows (null,
  // or a group without it: the rows are whole and tp is not used).
  LayerNorm(ParamStore& store, const std::string& prefix, int64_t C, TensorParallelComm* tp = nullptr);

  // weight = 1, bias = 0.
  void init();

  // out (N, C); saves mean and rstd (N) and the input pointer.
  float* forward(const float* inp, int64_t N);
  // The same with the output written only rounded, into out16 (N, C): the
  // next bf16 linear layer's input (Linear::rounded_input).
  void forward_rounded(const float* inp, int64_t N, Bf16* out16);

  // dinp (N, C) = dresid + dLN/dinp, written. dresid (may be null, may alias
  // dinp) is the gradient arriving through the residual path around this
  // norm: adding it here saves a pass. dout must not alias dinp.
  void backward(float* dinp, const float* dout, const float* dresid = nullptr);

  // Full recomputation (recompute.hpp): the output and statistics live in
  // `pool`'s buffers "<key>.out", "<key>.mean", "<key>.rstd".
  void share_activations(SharedActivations& pool, const std::string& key) {
    out_.share(&pool.get(key + ".out"));
    mean_.share(&pool.get(key + ".mean"));
    rstd_.share(&pool.get(key + ".rstd"));
  }
  // bf16 activations: backward reads the input and the statistics, not the
  // output (the next linear keeps its bf16 rounding), so only the output
  // lives in `pool`'s "<key>.out".
  void share_output(SharedActivations& pool, const std::string& key) { out_.share(&pool.get(key + ".out")); }

 private:
  ParamStore& store_;
  int64_t C_;
  TensorParallelComm* seq_tp_;  // non-null under sequence parallelism only
  size_t weight_, bias_;
  const float* inp_ = nullptr;  // (N, C), borrowed
  int64_t N_ = 0;
  DeviceArray<float> out_{memory_of(store_), MemoryKind::Activations};   // (N, C)
  DeviceArray<float> mean_{memory_of(store_), MemoryKind::Activations};  // (N)
  DeviceArray<float> rstd_{memory_of(store_), MemoryKind::Activations};  // (N)
  DeviceArray<float> dpartial_{memory_of(store_), MemoryKind::Activations};  // (2C) sequence parallelism: this rank's dweight, dbias
};

}  // namespace meshtrain::nn
