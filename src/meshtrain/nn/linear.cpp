#include "meshtrain/nn/linear.hpp"

#include "meshtrain/core/error.hpp"
#include "meshtrain/nn/backend.hpp"
#include "meshtrain/nn/init.hpp"

namespace meshtrain::nn {

namespace {

// "<prefix>.weight" (in, out) declared with the shard's placement, after the checks.
size_t declare_weight(ParamStore& store, const std::string& prefix, int64_t in, int64_t out,
                      const LinearShard& shard) {
  if (in <= 0 || out <= 0)
    throw Error("Linear '" + prefix + "': sizes must be positive, got " + shape_string({in, out}));
  if (shard.kind != LinearShard::Kind::None && !shard.tp)
    throw Error("Linear '" + prefix + "': a tensor-parallel shard needs its group");
  return store.declare(prefix + ".weight", {in, out}, true, shard.weight_placement());
}

}  // namespace

Linear::Linear(ParamStore& store, const std::string& prefix, int64_t in, int64_t out, bool bias, LinearShard shard)
    : store_(store),
      shard_(shard),
      weight_(declare_weight(store, prefix, in, out, shard)),
      in_(store.view(weight_).shape[0]),  // this rank's
      out_(store.view(weight_).shape[1]),
      has_bias_(bias),
      fp32_(store, weight_, in_, out_),
      bf16_(store, weight_, in_, out_) {
  if (bias) bias_ = store.declare(prefix + ".bias", {out}, false, shard.bias_placement());
}

void Linear::init(Rng& rng, float stddev) {
  fill_normal(store_, weight_, rng, stddev);
  if (has_bias_) fill_constant(store_.param(bias_), out_, 0.0f);
}

float* Linear::forward(const float* inp, int64_t M, const float* residual) {
  out_buf_.ensure(shard_.output_rows(M) * out_);
  return forward_into(inp, M, out_buf_.raw(), residual);
}

float* Linear::forward_into(const float* inp, int64_t M, float* out, const float* residual) {
  take_input(inp, M);
  return forward_products(M, out, residual);
}

void Linear::take_input(const float* inp, int64_t M) {
  if (inp) {
    operands().keep_input(shard_.gather_input(inp, M, in_, seq_), M);
  } else {
    rounded_input(M);  // the checks; the producer wrote the rows there
    bf16_.keep_rounded_input(M);
  }
  operands().keep_weight();
  M_ = M;
  forwarded_ = true;
}

void Linear::forward_rounded_output(const float* inp, int64_t M, kernels::Bf16* out16) {
  if (!store_.bf16_products()) throw Error("Linear::forward_rounded_output: only under bf16 products");
  if (shard_.sums_output())
    throw Error("Linear::forward_rounded_output: a row shard's partial sums meet over the group in fp32");
  take_input(inp, M);
  bf16_.forward_rounded(out16, has_bias_ ? store_.param(bias_) : nullptr);
}

bool Linear::takes_rounded_input() const { return store_.bf16_products() && !shard_.gathers_input(); }

kernels::Bf16* Linear::rounded_input(int64_t M) {
  if (!store_.bf16_products()) throw Error("Linear::rounded_input: only under bf16 products");
  if (!takes_rounded_input())
    throw Error("Linear::rounded_input: a column shard under sequence parallelism gathers its fp32 input");
  return bf16_.rounded_input(M);
}

float* Linear::forward_rounded(int64_t M, const float* residual) {
  out_buf_.ensure(shard_.output_rows(M) * out_);
  return forward_rounded_into(M, out_buf_.raw(), residual);
}

float* Linear::forward_rounded_into(int64_t M, float* out, const float* residual) {
  return forward_into(nullptr, M, out, residual);
}

float* Linear::forward_products(int64_t M, float* out, const float* residual) {
  LinearOperands& products = operands();
  const float* bias = has_bias_ ? store_.param(bias_) : nullptr;
  if (shard_.sums_output()) {
    // The partial products sum over the group first; bias and residual are
    // then added once, not once per rank.
    float* partial = shard_.product_output(out, M, out_, seq_);
    products.forward(0.0f, partial, nullptr);
    shard_.finish_output(partial, out, M, out_);
    backend_of(store_).add_rows(out, bias, residual, shard_.local_rows(M), out_);
    return out;
  }
  // A bias alone where the product adds it as it stores (bf16). Otherwise
  // bias and residual go in first and the product adds onto them (beta =
  // 1): one write pass instead of a read-modify-write pass after.
  if (products.adds_bias() && bias && !residual) {
    products.forward(0.0f, out, bias);
    return out;
  }
  const bool prefill = bias || residual;
  if (prefill) backend_of(store_).fill_rows(out, bias, residual, M, out_);
  products.forward(prefill ? 1.0f : 0.0f, out, nullptr);
  return out;
}

void Linear::backward(float* dinp, const float* dout) {
  take_output_grad(dout);
  backward_products(dinp);
}

void Linear::backward_rounded_input_grad(kernels::Bf16* dinp16, const float* dout) {
  if (!store_.bf16_products()) throw Error("Linear::backward_rounded_input_grad: only under bf16 products");
  if (shard_.sums_input_grad())
    throw Error("Linear::backward_rounded_input_grad: a column shard's input gradient sums over the group in fp32");
  take_output_grad(dout);
  backward_products(nullptr, dinp16);
}

void Linear::take_output_grad(const float* dout) {
  if (!forwarded_) throw Error("Linear::backward called before forward");
  if (bf16_.shares_scratch() && !store_.bf16_products())  // share_fp32_temporaries() ran
    throw Error("Linear: an fp32 backward after bf16 activations were set up (its fp32 input is not kept)");
  operands().keep_output_grad(shard_.gather_output_grad(dout, M_, out_, seq_), M_,
                              has_bias_ ? store_.grad(bias_) : nullptr, defer_weight_);
}

kernels::Bf16* Linear::rounded_output_grad(int64_t M) {
  if (!store_.bf16_products()) throw Error("Linear::rounded_output_grad: only under bf16 products");
  if (shard_.gathers_output_grad())
    throw Error("Linear::rounded_output_grad: a row shard under sequence parallelism gathers its fp32 dout");
  return bf16_.rounded_output_grad(M, defer_weight_);
}

void Linear::backward_rounded(float* dinp) {
  if (!forwarded_) throw Error("Linear::backward_rounded called before forward");
  backward_products(dinp);
}

void Linear::backward_products(float* dinp, kernels::Bf16* dinp16) {
  if (defer_weight_ && shard_.gathers_input())
    throw Error("Linear: a deferred weight gradient needs the gathered input, which a column shard under "
                "sequence parallelism reuses in backward");
  LinearOperands& products = operands();
  float* dinp_all = dinp ? shard_.product_input_grad(dinp, seq_) : nullptr;  // (M, in)
  const bool input = dinp || dinp16;
  if (input) products.refresh_weight();
  auto announce = [&] {
    store_.grad_ready(weight_);
    if (has_bias_) store_.grad_ready(bias_);
  };
  // dinp (M, in) = dout (M, out) W^T (out, in)
  auto input_grad = [&] {
    if (dinp16)
      bf16_.input_grad_rounded(dinp16);
    else
      products.input_grad(dinp_all);
  };
  if (defer_weight_) {
    // Input half now; the weight product waits for backward_weight(), with
    // the operands' copy of dout.
    weight_pending_ = true;
    if (has_bias_) store_.grad_ready(bias_);
    if (input) input_grad();
  } else if (input && dinp_all == dinp) {
    // Independent and equally large (2 M in out FLOPs each): the backend
    // decides whether they run side by side (kernels/backend.hpp).
    backend_of(store_).run_pair([&] { weight_gradient(); }, announce, input_grad);
  } else {
    // A column shard under sequence parallelism writes its whole-row input
    // gradient over the gathered input, once the weight gradient has read it.
    weight_gradient();
    announce();
    if (input) input_grad();
  }
  if (dinp) shard_.finish_input_grad(dinp_all, dinp, M_, in_);
}

void Linear::weight_gradient() {
  // Written, not added, onto zeros.
  operands().weight_grad(store_.claim_zeroed_grad(weight_) ? 0.0f : 1.0f, store_.grad(weight_));
}

void Linear::backward_weight() {
  if (!weight_pending_) throw Error("Linear::backward_weight called without a deferred backward before it");
  weight_pending_ = false;
  weight_gradient();
  store_.grad_ready(weight_);
}

}  // namespace meshtrain::nn
