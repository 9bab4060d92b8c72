#pragma once
// The operands of a Linear's three products, in the precision they run in
// (training.precision, ParamStore::compute_precision):
//   forward          out (M, out) = x (M, in) W (in, out) [+ bias] + beta out
//   weight gradient  dW (in, out) = x^T dy + beta dW
//   input gradient   dx (M, in)   = dy W^T
// Fp32Operands reads the fp32 tensors themselves (the caller's x and dy,
// the store's W). Bf16Operands rounds x, W and dy to bf16 once each and
// keeps those copies for both products that read them; the sums stay fp32.
// The layer (linear.hpp) says what to keep and when; the operands say how.
#include <cstdint>
#include <string>

#include "meshtrain/core/device_array.hpp"
#include "meshtrain/core/param_store.hpp"
#include "meshtrain/kernels/bf16.hpp"
#include "meshtrain/nn/backend.hpp"
#include "meshtrain/nn/recompute.hpp"

namespace meshtrain::nn {

class LinearOperands {
 public:
  LinearOperands(ParamStore& store, size_t weight, int64_t in, int64_t out)
      : store_(store), weight_(weight), in_(in), out_(out) {}
  virtual ~LinearOperands() = default;
  LinearOperands(const LinearOperands&) = delete;
  LinearOperands& operator=(const LinearOperands&) = delete;

  // Forward's input x (M, in), kept for the weight gradient (the caller
  // keeps it alive and unchanged until then), and the weight as it is now.
  virtual void keep_input(const float* x, int64_t M) = 0;
  virtual void keep_weight() = 0;
  // Whether forward() adds a bias as it stores (else bias must be null).
  virtual bool adds_bias() const = 0;
  // out = x W [+ bias] + beta out over the kept input's M rows.
  virtual void forward(float beta, float* out, const float* bias) = 0;

  // Backward's output gradient dy (M, out), kept for both products:
  // borrowed, or copied where `deferred` (a weight gradient that runs after
  // the caller's dy is gone). dbias, when not null, gets dy's column sums
  // added.
  virtual void keep_output_grad(const float* dy, int64_t M, float* dbias, bool deferred) = 0;
  // The weight as forward read it, again if another layer's has taken its
  // place since (a shared copy: ZeRO-3).
  virtual void refresh_weight() = 0;
  virtual void weight_grad(float beta, float* dW) = 0;
  virtual void input_grad(float* dx) = 0;

 protected:
  ParamStore& store_;
  size_t weight_;
  int64_t in_, out_;
  int64_t rows_ = 0;  // M of the kept input
};

class Fp32Operands final : public LinearOperands {
 public:
  using LinearOperands::LinearOperands;
  void keep_input(const float* x, int64_t M) override { x_ = x, rows_ = M; }
  void keep_weight() override {}
  bool adds_bias() const override { return false; }
  void forward(float beta, float* out, const float* bias) override;
  void keep_output_grad(const float* dy, int64_t M, float* dbias, bool deferred) override;
  void refresh_weight() override {}
  void weight_grad(float beta, float* dW) override;
  void input_grad(float* dx) override;

 private:
  const float* x_ = nullptr;   // (M, in), the caller's
  const float* dy_ = nullptr;  // (M, out), the caller's or dy_saved_
  DeviceArray<float> dy_saved_{memory_of(store_), MemoryKind::Activations};  // a deferred weight gradient's dy
};

class Bf16Operands final : public LinearOperands {
 public:
  using LinearOperands::LinearOperands;
  void keep_input(const float* x, int64_t M) override;
  void keep_weight() override;
  bool adds_bias() const override { return true; }  // oneDNN and cuBLASLt add it as they store
  void forward(float beta, float* out, const float* bias) override;
  void keep_output_grad(const float* dy, int64_t M, float* dbias, bool deferred) override;
  void refresh_weight() override;
  void weight_grad(float beta, float* dW) override;
  void input_grad(float* dx) override;

  // A producer that writes x already rounded (the MLP's GELU, a block's
  // layernorms): rounded_input(M) is where, then keep_rounded_input(M).
  kernels::Bf16* rounded_input(int64_t M);
  void keep_rounded_input(int64_t M) { rows_ = M; }
  // The output written only rounded (bias included), for a consumer that
  // reads nothing else (attention's q, k, v).
  void forward_rounded(kernels::Bf16* out16, const float* bias);
  // A producer that writes dy already rounded, and its bias gradient itself
  // (the MLP's GELU backward): rounded_output_grad(M, deferred) is where.
  kernels::Bf16* rounded_output_grad(int64_t M, bool deferred);
  // The input gradient written only rounded, for a consumer that reads it in
  // bf16 (attention's heads; the GELU's backward).
  void input_grad_rounded(kernels::Bf16* dx16);

  // Sharing (recompute.hpp), as Linear's share_* say: the rounded input and
  // weight in `pool`'s "<key>.in16" and "<key>.w16"; the rounded dy of an
  // undeferred backward and, under ZeRO-3, the rounded weight in buffers
  // every linear layer shares; the rounded input in `pool`'s `key`.
  void share_input_and_weight(SharedActivations& pool, const std::string& key);
  void share_scratch(SharedActivations& pool);
  void share_input(SharedActivations& pool, const std::string& key) { x16_.share(&pool.get_bf16(key)); }
  bool shares_scratch() const { return dy16_scratch_ != nullptr; }

 private:
  // The rounded weight's buffer: the shared one when the weights are transient.
  DeviceArray<kernels::Bf16>& weight_copy() {
    return w16_scratch_ && store_.params_transient() ? *w16_scratch_ : w16_;
  }
  DeviceArray<kernels::Bf16> w16_{memory_of(store_), MemoryKind::WeightCopies};  // (in, out)
  DeviceArray<kernels::Bf16> x16_{memory_of(store_), MemoryKind::Activations};   // (M, in)
  DeviceArray<kernels::Bf16> dy16_{memory_of(store_), MemoryKind::Activations};  // (M, out), deferred or unshared
  DeviceArray<kernels::Bf16>* dy16_scratch_ = nullptr;  // shared, for an undeferred backward
  DeviceArray<kernels::Bf16>* w16_scratch_ = nullptr;   // shared, for transient (ZeRO-3) weights
  kernels::Bf16* dy16_ready_ = nullptr;  // where the kept dy is: dy16_ or the shared one
};

}  // namespace meshtrain::nn
