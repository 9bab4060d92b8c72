#include "meshtrain/nn/linear.hpp"

#include <algorithm>

#include "meshtrain/core/error.hpp"
#include "meshtrain/nn/backend.hpp"
#include "meshtrain/nn/init.hpp"

namespace meshtrain::nn {

using kernels::Trans;

namespace {

Placement weight_placement(const LinearShard& s) {
  if (s.kind == LinearShard::Kind::Column) return Placement::sharded(1, s.tp->size(), s.tp->rank(), s.blocks);
  if (s.kind == LinearShard::Kind::Row) return Placement::sharded(0, s.tp->size(), s.tp->rank());
  return {};
}

}  // namespace

Linear::Linear(ParamStore& store, const std::string& prefix, int64_t in, int64_t out, bool bias, LinearShard shard)
    : store_(store), in_(in), out_(out), has_bias_(bias), shard_(shard) {
  if (in <= 0 || out <= 0)
    throw Error("Linear '" + prefix + "': sizes must be positive, got " + shape_string({in, out}));
  if (shard.kind != LinearShard::Kind::None && !shard.tp)
    throw Error("Linear '" + prefix + "': a tensor-parallel shard needs its group");
  const Placement placement = weight_placement(shard);
  weight_ = store.declare(prefix + ".weight", {in, out}, true, placement);
  in_ = store.view(weight_).shape[0];
  out_ = store.view(weight_).shape[1];
  const Placement bias_placement =
      shard.kind == LinearShard::Kind::Column ? Placement::sharded(0, shard.tp->size(), shard.tp->rank(), shard.blocks)
                                              : Placement{};
  if (bias) bias_ = store.declare(prefix + ".bias", {out}, false, bias_placement);
}

void Linear::init(Rng& rng, float stddev) {
  fill_normal(store_, weight_, rng, stddev);
  if (has_bias_) fill_constant(store_.param(bias_), out_, 0.0f);
}

bool Linear::sequence_parallel() const {
  return shard_.kind != LinearShard::Kind::None && shard_.tp->sequence_parallel();
}

int64_t Linear::local_rows(int64_t M) const { return sequence_parallel() ? sequence_rows(*shard_.tp, M) : M; }

float* Linear::forward(const float* inp, int64_t M, const float* residual) {
  // A row shard's output is the residual side (this rank's rows under
  // sequence parallelism); a column shard's covers every row it gathered.
  out_buf_.ensure((shard_.kind == LinearShard::Kind::Row ? local_rows(M) : M) * out_);
  return forward_into(inp, M, out_buf_.raw(), residual);
}

float* Linear::forward_into(const float* inp, int64_t M, float* out, const float* residual) {
  return forward_products(take_input(inp, M), M, out, residual);
}

const float* Linear::take_input(const float* inp, int64_t M) {
  if (!inp) {
    rounded_input(M);  // the checks; in16_ holds the producer's rows
    inp_ = nullptr;
    M_ = M;
    forwarded_ = true;
    return nullptr;
  }
  if (sequence_parallel() && shard_.kind == LinearShard::Kind::Column) {
    seq_.ensure(M * in_);
    shard_.tp->all_gather(inp, seq_.raw(), static_cast<size_t>(local_rows(M) * in_));  // (M/T, in) -> (M, in)
    inp = seq_.raw();
  }
  inp_ = inp;
  M_ = M;
  forwarded_ = true;
  if (store_.bf16_products()) round_into(store_, inp, static_cast<size_t>(M * in_), in16_);
  return inp;
}

void Linear::forward_rounded_output(const float* inp, int64_t M, kernels::Bf16* out16) {
  if (!store_.bf16_products()) throw Error("Linear::forward_rounded_output: only under bf16 products");
  if (shard_.kind == LinearShard::Kind::Row)
    throw Error("Linear::forward_rounded_output: a row shard's partial sums meet over the group in fp32");
  take_input(inp, M);
  round_into(store_, store_.param(weight_), static_cast<size_t>(in_ * out_), weight_copy());
  const int m = static_cast<int>(M), n = static_cast<int>(out_), k = static_cast<int>(in_);
  backend_of(store_).gemm_bf16_rounded(Trans::No, Trans::No, m, n, k, in16_.raw(), k, weight_copy().raw(), n, out16,
                                       n, has_bias_ ? store_.param(bias_) : nullptr);
}

bool Linear::takes_rounded_input() const {
  return store_.bf16_products() && !(sequence_parallel() && shard_.kind == LinearShard::Kind::Column);
}

kernels::Bf16* Linear::rounded_input(int64_t M) {
  if (!store_.bf16_products()) throw Error("Linear::rounded_input: only under bf16 products");
  if (!takes_rounded_input())
    throw Error("Linear::rounded_input: a column shard under sequence parallelism gathers its fp32 input");
  in16_.ensure(M * in_);
  return in16_.raw();
}

float* Linear::forward_rounded(int64_t M, const float* residual) {
  out_buf_.ensure((shard_.kind == LinearShard::Kind::Row ? local_rows(M) : M) * out_);
  return forward_rounded_into(M, out_buf_.raw(), residual);
}

float* Linear::forward_rounded_into(int64_t M, float* out, const float* residual) {
  return forward_into(nullptr, M, out, residual);
}

float* Linear::forward_products(const float* inp, int64_t M, float* out, const float* residual) {
  // The weight rounded once: backward reuses it (it does not change between
  // a forward and its backward).
  if (store_.bf16_products()) round_into(store_, store_.param(weight_), static_cast<size_t>(in_ * out_), weight_copy());
  const bool seq = sequence_parallel();
  const int64_t rows = local_rows(M);
  const float* bias = has_bias_ ? store_.param(bias_) : nullptr;
  if (shard_.kind == LinearShard::Kind::Row) {
    float* partial = seq ? (seq_.ensure(M * out_), seq_.raw()) : out;  // (M, out)
    // The partial products sum over the group first; bias and residual are
    // then added once, not once per rank.
    gemm_forward(inp, M, 0.0f, partial);
    if (seq)
      shard_.tp->reduce_scatter_sum(partial, out, static_cast<size_t>(rows * out_));  // -> (M/T, out)
    else
      shard_.tp->all_reduce_sum(out, static_cast<size_t>(M * out_));
    backend_of(store_).add_rows(out, bias, residual, rows, out_);
    return out;
  }
  // bf16 with a bias alone: oneDNN adds the bias as it stores the result.
  // Otherwise bias and residual go in first and gemm adds onto them
  // (beta = 1): one write pass instead of a read-modify-write pass after.
  if (store_.bf16_products() && bias && !residual) {
    gemm_forward(inp, M, 0.0f, out, bias);
    return out;
  }
  const bool prefill = bias || residual;
  if (prefill) backend_of(store_).fill_rows(out, bias, residual, M, out_);
  gemm_forward(inp, M, prefill ? 1.0f : 0.0f, out);
  return out;
}

void Linear::backward(float* dinp, const float* dout) { backward_fp32_dout(dinp, dout, nullptr); }

void Linear::backward_rounded_input_grad(kernels::Bf16* dinp16, const float* dout) {
  if (!store_.bf16_products()) throw Error("Linear::backward_rounded_input_grad: only under bf16 products");
  if (shard_.kind == LinearShard::Kind::Column)
    throw Error("Linear::backward_rounded_input_grad: a column shard's input gradient sums over the group in fp32");
  backward_fp32_dout(nullptr, dout, dinp16);
}

void Linear::backward_fp32_dout(float* dinp, const float* dout, kernels::Bf16* dinp16) {
  if (!forwarded_) throw Error("Linear::backward called before forward");
  if (dout16_scratch_ && !store_.bf16_products())  // share_fp32_temporaries() ran
    throw Error("Linear: an fp32 backward after bf16 activations were set up (its fp32 input is not kept)");
  if (sequence_parallel() && shard_.kind != LinearShard::Kind::Column) {
    shard_.tp->all_gather(dout, seq_.raw(), static_cast<size_t>(local_rows(M_) * out_));  // (M/T, out) -> (M, out)
    dout = seq_.raw();
  }
  if (!store_.bf16_products()) return backward_products(dinp, dout, nullptr, /*bias_from_dout=*/true);
  // bf16: dout rounded once for both products (and kept for a deferred
  // weight gradient: the layer's own buffer then, not the shared one), in
  // the same pass as the bias gradient.
  kernels::Bf16* dout16 = rounded_output_grad_buffer(M_);
  if (has_bias_) {
    backend_of(store_).bias_backward_rounded(store_.grad(bias_), dout16, dout, M_, out_);
  } else {
    backend_of(store_).to_bf16(dout, dout16, static_cast<size_t>(M_ * out_));
  }
  backward_products(dinp, dout, dout16, /*bias_from_dout=*/false, dinp16);
}

kernels::Bf16* Linear::rounded_output_grad(int64_t M) {
  if (!store_.bf16_products()) throw Error("Linear::rounded_output_grad: only under bf16 products");
  if (sequence_parallel() && shard_.kind != LinearShard::Kind::Column)
    throw Error("Linear::rounded_output_grad: a row shard under sequence parallelism gathers its fp32 dout");
  return rounded_output_grad_buffer(M);
}

void Linear::backward_rounded(float* dinp) {
  if (!forwarded_) throw Error("Linear::backward_rounded called before forward");
  backward_products(dinp, nullptr, rounded_output_grad(M_), /*bias_from_dout=*/false);
}

void Linear::backward_products(float* dinp, const float* dout, const kernels::Bf16* dout16, bool bias_from_dout,
                               kernels::Bf16* dinp16) {
  const bool seq = sequence_parallel();
  const bool column = shard_.kind == LinearShard::Kind::Column;
  const int64_t rows = local_rows(M_);
  if (defer_weight_ && seq && column)
    throw Error("Linear: a deferred weight gradient needs the gathered input, which a column shard under "
                "sequence parallelism reuses in backward");
  // A column shard under sequence parallelism writes its whole-row input
  // gradient over the gathered input, once the weight gradient has read it.
  float* dinp_all = dinp && seq && column ? seq_.raw() : dinp;  // (M, in)
  const int M = static_cast<int>(M_), in = static_cast<int>(in_), out = static_cast<int>(out_);
  // A shared weight copy holds another layer's weight by now: round this
  // one's again (the same bits as in forward; ZeRO-3 has gathered it).
  const bool input = dinp || dinp16;
  const bool reround = store_.bf16_products() && input && &weight_copy() != &w16_;
  if (reround) round_into(store_, store_.param(weight_), static_cast<size_t>(in_ * out_), weight_copy());
  auto weight_grad = [&] {
    gemm_weight_grad(dout, dout16);
    if (has_bias_ && bias_from_dout) backend_of(store_).bias_backward(store_.grad(bias_), dout, M_, out_);
  };
  auto announce = [&] {
    store_.grad_ready(weight_);
    if (has_bias_) store_.grad_ready(bias_);
  };
  // dinp (M, in) = dout (M, out) W^T (out, in)
  auto input_grad = [&] {
    if (dinp16)
      backend_of(store_).gemm_bf16_rounded(Trans::No, Trans::Yes, M, in, out, dout16, out, weight_copy().raw(), out,
                                           dinp16, in);
    else if (store_.bf16_products())
      backend_of(store_).gemm_bf16(Trans::No, Trans::Yes, M, in, out, 1.0f, dout16, out, weight_copy().raw(), out,
                                   0.0f, dinp_all, in);
    else
      backend_of(store_).gemm(Trans::No, Trans::Yes, M, in, out, 1.0f, dout, out, store_.param(weight_), out, 0.0f,
                              dinp_all, in);
  };
  if (defer_weight_) {
    // Input half now; the weight GEMM waits for backward_weight(). Under
    // bf16 the rounded dout16_ is that copy already.
    if (!store_.bf16_products()) {
      dout_saved_.ensure(M_ * out_);
      backend_of(store_).copy(dout_saved_.raw(), dout, static_cast<size_t>(M_ * out_));
    }
    weight_pending_ = true;
    if (has_bias_) {
      if (bias_from_dout) backend_of(store_).bias_backward(store_.grad(bias_), dout, M_, out_);
      store_.grad_ready(bias_);
    }
    if (input) input_grad();
  } else if (input && dinp_all == dinp) {
    // Independent and equally large (2 M in out FLOPs each): the backend
    // decides whether they run side by side (kernels/backend.hpp).
    backend_of(store_).run_pair(weight_grad, announce, input_grad);
  } else {
    weight_grad();
    announce();
    if (input) input_grad();
  }
  // Column: each rank's input gradient covers its output columns only.
  if (!dinp || !column) return;
  if (seq)
    shard_.tp->reduce_scatter_sum(dinp_all, dinp, static_cast<size_t>(rows * in_));  // -> (M/T, in)
  else
    shard_.tp->all_reduce_sum(dinp, static_cast<size_t>(M_ * in_));
}

void Linear::gemm_forward(const float* inp, int64_t M, float beta, float* out, const float* bias) {
  // out (M, out) = inp (M, in) W (in, out) [+ bias] + beta out
  const int m = static_cast<int>(M), n = static_cast<int>(out_), k = static_cast<int>(in_);
  if (store_.bf16_products())
    backend_of(store_).gemm_bf16(Trans::No, Trans::No, m, n, k, 1.0f, in16_.raw(), k, weight_copy().raw(), n, beta,
                                 out, n, bias);
  else
    backend_of(store_).gemm(Trans::No, Trans::No, m, n, k, 1.0f, inp, k, store_.param(weight_), n, beta, out, n);
}

void Linear::gemm_weight_grad(const float* dout, const kernels::Bf16* dout16) {
  const int M = static_cast<int>(M_), in = static_cast<int>(in_), out = static_cast<int>(out_);
  // dW (in, out) += inp^T (in, M) dout (M, out); written, not added, onto zeros.
  const float beta = store_.claim_zeroed_grad(weight_) ? 0.0f : 1.0f;
  if (store_.bf16_products())
    backend_of(store_).gemm_bf16(Trans::Yes, Trans::No, in, out, M, 1.0f, in16_.raw(), in, dout16, out, beta,
                                 store_.grad(weight_), out);
  else
    backend_of(store_).gemm(Trans::Yes, Trans::No, in, out, M, 1.0f, inp_, in, dout, out, beta, store_.grad(weight_),
                            out);
}

void Linear::backward_weight() {
  if (!weight_pending_) throw Error("Linear::backward_weight called without a deferred backward before it");
  weight_pending_ = false;
  gemm_weight_grad(dout_saved_.raw(), dout16_.raw());
  store_.grad_ready(weight_);
}

}  // namespace meshtrain::nn
