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
//
// Its concerns live apart: the tensor-parallel split and its communication
// in LinearShard (linear_shard.hpp), the precision of the products in the
// operand types (linear_operands.hpp: fp32, or bf16 copies with fp32 sums),
// and the split of backward for zero-bubble pipelines as an option
// (defer_weight_gradient). This class orders them.
#include <cstdint>
#include <string>

#include "meshtrain/core/device_array.hpp"
#include "meshtrain/core/param_store.hpp"
#include "meshtrain/core/rng.hpp"
#include "meshtrain/kernels/bf16.hpp"
#include "meshtrain/nn/backend.hpp"
#include "meshtrain/nn/linear_operands.hpp"
#include "meshtrain/nn/linear_shard.hpp"
#include "meshtrain/nn/recompute.hpp"

namespace meshtrain::nn {

class Linear {
 public:
  // Declares "<prefix>.weight" (in, out), weight-decayed, and if bias
  // "<prefix>.bias" (out): global shapes, of which this rank holds its shard.
  // Throws Error when a shard's dimension does not divide by the group size.
  Linear(ParamStore& store, const std::string& prefix, int64_t in, int64_t out, bool bias = true,
         LinearShard shard = {});

  // weight ~ N(0, stddev), bias = 0.
  void init(Rng& rng, float stddev);

  // out (M, out) = inp (M, in) W + b [+ residual (M, out)]. residual lets a
  // block's projection write the residual stream directly (x + proj(...)).
  // M counts every row; under sequence parallelism a Column's inp and a
  // Row's out and residual hold this rank's M/T of them (Error when M does
  // not divide by T).
  float* forward(const float* inp, int64_t M, const float* residual = nullptr);
  // The same into `out`, the caller's memory, which need not outlive the
  // call (backward reads the input, not the output): (M, out), or a row
  // shard's M/T rows under sequence parallelism. Returns out.
  float* forward_into(const float* inp, int64_t M, float* out, const float* residual = nullptr);
  // bf16 products: a producer may write this layer's input already rounded
  // into rounded_input(M) (M rows, in_features() wide) and then call
  // forward_rounded() / forward_rounded_into() instead, or any forward with
  // a null input: the fp32 input is never made (the MLP's GELU, a block's
  // layernorms). Not for a column shard under sequence parallelism, which
  // gathers the fp32 input: Error (takes_rounded_input() says beforehand).
  bool takes_rounded_input() const;
  kernels::Bf16* rounded_input(int64_t M);
  // bf16 products, no residual: the output (M, out) written only rounded,
  // into out16, bias included (oneDNN rounds as it stores), for a consumer
  // that reads nothing else (attention's q, k, v). Not for a row shard,
  // whose partial sums meet over the group in fp32: Error.
  void forward_rounded_output(const float* inp, int64_t M, kernels::Bf16* out16);
  float* forward_rounded(int64_t M, const float* residual = nullptr);
  float* forward_rounded_into(int64_t M, float* out, const float* residual = nullptr);

  // dW += inp^T dout, db += colsum dout; dinp (M, in) = dout W^T, written,
  // skipped when dinp is null (a first layer whose input needs no gradient).
  // Under sequence parallelism a Column's dinp and a Row's dout hold M/T rows.
  void backward(float* dinp, const float* dout);
  // bf16 products: backward() with the input gradient written only rounded,
  // into dinp16 (M, in), as oneDNN stores it: for a consumer that reads it
  // in bf16 (attention's heads; the GELU's backward, as under PyTorch's
  // autocast, where a bf16 activation's gradient is bf16). Not for a column
  // shard, whose input gradient sums over the group in fp32: Error.
  void backward_rounded_input_grad(kernels::Bf16* dinp16, const float* dout);
  // bf16 products: a producer may write dout already rounded into
  // rounded_output_grad(M) and add its bias gradient (the column sums of the
  // unrounded dout) itself, then call backward_rounded(): the fp32 dout is
  // never read (the MLP's GELU backward). Not for a row shard under
  // sequence parallelism, which gathers the fp32 dout: Error.
  kernels::Bf16* rounded_output_grad(int64_t M);
  float* bias_grad() { return has_bias_ ? store_.grad(bias_) : nullptr; }
  void backward_rounded(float* dinp);

  // Zero-bubble pipelines split backward in two (Qi et al. 2023): with
  // deferral on, backward() computes the input and bias gradients and keeps
  // a copy of dout (M, out); backward_weight() later adds dW += inp^T dout
  // and announces it. inp must stay alive until then. Not under sequence
  // parallelism for a column shard (its gathered input is backward's work
  // area): Error.
  void defer_weight_gradient(bool on) { defer_weight_ = on; }
  void backward_weight();
  // Tells the store its gradients are final without a backward (a layer
  // that saw no rows this micro-batch), so data parallelism need not wait.
  void announce_gradients() {
    store_.grad_ready(weight_);
    if (has_bias_) store_.grad_ready(bias_);
  }

  int64_t in_features() const { return in_; }    // this rank's (Row: in/T)
  int64_t out_features() const { return out_; }  // this rank's (Column: out/T)
  size_t weight_index() const { return weight_; }
  float* output() { return out_buf_.raw(); }  // (M, out) of the last forward (not forward_into's)

  // Full recomputation (recompute.hpp): the output (when `output`) and the
  // sequence-parallel work area live in `pool`'s "<key>.out", "<key>.seq".
  // A deferred dout stays the layer's own: it waits for backward_weight().
  // The bf16 operands a replay rounds again share the pool too.
  void share_activations(SharedActivations& pool, const std::string& key, bool output = true) {
    share_output_and_work_area(pool, key, output);
    bf16_.share_input_and_weight(pool, key);
  }
  // bf16 activations (recompute.hpp): backward reads only the rounded
  // operands, so the fp32 output (when `output`) and the sequence-parallel
  // work area need not outlive the forward and live in `pool` as above; the
  // rounded output gradient, which lives only inside backward unless it is
  // deferred, in one buffer every linear layer shares. Backward then refuses
  // to run in fp32 (Error): its fp32 input may be gone.
  // Under ZeRO-3 (ParamStore::params_transient) the rounded weight, too,
  // lives in one buffer the linear layers share, rounded again in backward
  // from the re-gathered weight: the bf16 copies stay as sharded as the
  // weights, one layer's at a time.
  void share_fp32_temporaries(SharedActivations& pool, const std::string& key, bool output) {
    share_output_and_work_area(pool, key, output);
    bf16_.share_scratch(pool);
  }
  // bf16 products: the rounded input in `pool`'s "<key>" instead of the
  // layer's own, for a producer that writes it again before this layer's
  // backward and backward_weight() (the MLP's GELU, mlp.hpp).
  void share_rounded_input(SharedActivations& pool, const std::string& key) { bf16_.share_input(pool, key); }

 private:
  ParamStore& store_;
  LinearShard shard_;
  size_t weight_, bias_ = 0;
  int64_t in_, out_;
  bool has_bias_;
  // The products' operands, one type per precision; operands() is the
  // store's (compute_precision), the bf16-only calls use bf16_.
  Fp32Operands fp32_;
  Bf16Operands bf16_;
  LinearOperands& operands() {
    return store_.bf16_products() ? static_cast<LinearOperands&>(bf16_) : static_cast<LinearOperands&>(fp32_);
  }
  void share_output_and_work_area(SharedActivations& pool, const std::string& key, bool output) {
    if (output) out_buf_.share(&pool.get(key + ".out"));
    seq_.share(&pool.get(key + ".seq"));
  }
  // forward_into's start: the input gathered (a column shard under sequence
  // parallelism) and kept by the operands with the weight; null: the
  // producer wrote it into rounded_input() already.
  void take_input(const float* inp, int64_t M);
  // forward_into's products once the input is taken.
  float* forward_products(int64_t M, float* out, const float* residual);
  // backward's start: dout gathered (a row shard under sequence
  // parallelism) and kept by the operands, with the bias gradient.
  void take_output_grad(const float* dout);
  // backward's products once dout is taken; dinp or dinp16 (rounded)
  // receives the input gradient; both null: none.
  void backward_products(float* dinp, kernels::Bf16* dinp16 = nullptr);
  // dW += inp^T dout over the last forward's rows, written onto zeros.
  void weight_gradient();

  int64_t M_ = 0;
  bool forwarded_ = false;  // a forward has run (backward's precondition)
  DeviceArray<float> out_buf_{memory_of(store_), MemoryKind::Activations};  // (M, out); Row under SP (M/T, out)
  // Sequence parallelism only. Column: the gathered input (M, in), then the
  // work area of backward's input-gradient reduce-scatter. Row: the partial
  // output (M, out), then backward's gathered dout (M, out).
  DeviceArray<float> seq_{memory_of(store_), MemoryKind::Activations};
  bool defer_weight_ = false;
  bool weight_pending_ = false;  // backward() ran, backward_weight() not yet
};

}  // namespace meshtrain::nn
