#pragma once
// A fully connected layer, weight stored (in, out) like Hugging Face GPT-2's
// Conv1D so forward is one row-major gemm:  out (M, out) = inp (M, in) W + b.
//
// Conventions shared by every layer in nn/:
//  - forward() returns a buffer the layer owns (its output, reused across
//    steps: it grows on first use, never per step) and remembers the input
//    pointer for backward(); the caller keeps that input alive and unchanged.
//  - backward() ADDS into parameter gradients (ParamStore::grad) and WRITES
//    (overwrites) activation gradients such as dinp.
#include <cstdint>
#include <string>

#include "meshtrain/core/aligned_buffer.hpp"
#include "meshtrain/core/param_store.hpp"
#include "meshtrain/core/rng.hpp"

namespace meshtrain::nn {

class Linear {
 public:
  // Declares "<prefix>.weight" (in, out), weight-decayed, and if bias "<prefix>.bias" (out).
  Linear(ParamStore& store, const std::string& prefix, int64_t in, int64_t out, bool bias = true);

  // weight ~ N(0, stddev), bias = 0.
  void init(Rng& rng, float stddev);

  // out (M, out) = inp (M, in) W + b [+ residual (M, out)]. residual lets a
  // block's projection write the residual stream directly (x + proj(...)).
  float* forward(const float* inp, int64_t M, const float* residual = nullptr);

  // dW += inp^T dout, db += colsum dout; dinp (M, in) = dout W^T, written,
  // skipped when dinp is null (a first layer whose input needs no gradient).
  void backward(float* dinp, const float* dout);

  int64_t in_features() const { return in_; }
  int64_t out_features() const { return out_; }
  size_t weight_index() const { return weight_; }
  float* output() { return out_buf_.data(); }  // (M, out) of the last forward

 private:
  ParamStore& store_;
  int64_t in_, out_;
  size_t weight_, bias_ = 0;
  bool has_bias_;
  const float* inp_ = nullptr;  // (M, in), borrowed from the caller
  int64_t M_ = 0;
  AlignedBuffer<float> out_buf_{MemoryKind::Activations};  // (M, out)
};

}  // namespace meshtrain::nn
