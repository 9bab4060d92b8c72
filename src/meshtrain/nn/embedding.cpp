#include "meshtrain/nn/embedding.hpp"

#include "meshtrain/core/error.hpp"
#include "meshtrain/kernels/embedding.hpp"
#include "meshtrain/nn/backend.hpp"
#include "meshtrain/nn/init.hpp"

namespace meshtrain::nn {

Embedding::Embedding(ParamStore& store, const std::string& wte_name, const std::string& wpe_name, int64_t V,
                     int64_t max_T, int64_t C, TensorParallelComm* tp, bool wte_unit_alone)
    : store_(store), V_(V), max_T_(max_T), C_(C), tp_(tp) {
  if (V <= 0 || max_T <= 0 || C <= 0)
    throw Error("Embedding: sizes must be positive, got V=" + std::to_string(V) +
                " max_T=" + std::to_string(max_T) + " C=" + std::to_string(C));
  wte_ = tp ? store.declare(wte_name, {V, C}, true, Placement::sharded(0, tp->size(), tp->rank()))
            : store.declare(wte_name, {V, C}, true);
  if (wte_unit_alone) store.close_whole_step_unit();
  wpe_ = store.declare(wpe_name, {max_T, C}, true);
  V_rows_ = store.view(wte_).shape[0];
  v0_ = tp ? tp->rank() * V_rows_ : 0;
}

void Embedding::init(Rng& rng, float stddev) {
  fill_normal(store_, wte_, rng, stddev);
  fill_normal(store_, wpe_, rng, stddev);
}

float* Embedding::forward(const int32_t* tokens, int64_t B, int64_t T) {
  if (T > max_T_)
    throw Error("Embedding: sequence length " + std::to_string(T) + " exceeds block size " + std::to_string(max_T_));
  // Checked here, serially, because a kernel inside a parallel region cannot throw.
  for (int64_t i = 0; i < B * T; ++i)
    if (tokens[i] < 0 || tokens[i] >= V_)
      throw Error("Embedding: token " + std::to_string(tokens[i]) + " at position " + std::to_string(i) +
                  " is outside the vocabulary [0, " + std::to_string(V_) + ")");
  const int64_t N = B * T;
  const bool seq = sequence_parallel(tp_);
  const int64_t rows = seq ? sequence_rows(*tp_, N) : N;
  out_.ensure(rows * C_);
  tokens = staged_input(backend_of(store_), tokens, static_cast<size_t>(N), tokens_staged_);
  tokens_ = tokens;
  B_ = B;
  T_ = T;
  float* out = out_.raw();
  if (!tp_) {
    backend_of(store_).encoder_forward(out, tokens, store_.param(wte_), store_.param(wpe_), B, T, C_);
    return out;
  }
  if (!seq) {
    backend_of(store_).embedding_rows_forward(out, tokens, store_.param(wte_), v0_, V_rows_, N, C_);
    tp_->all_reduce_sum(out, static_cast<size_t>(N * C_));
    backend_of(store_).position_add_forward(out, store_.param(wpe_), B, T, C_);  // after the sum: once
    return out;
  }
  seq_.ensure(N * C_);
  backend_of(store_).embedding_rows_forward(seq_.raw(), tokens, store_.param(wte_), v0_, V_rows_, N, C_);
  tp_->reduce_scatter_sum(seq_.raw(), out, static_cast<size_t>(rows * C_));  // (N, C) -> (N/TP, C)
  backend_of(store_).position_add_rows_forward(out, store_.param(wpe_), tp_->rank() * rows, rows, T, C_);
  return out;
}

void Embedding::backward(const float* dout) {
  if (!tokens_) throw Error("Embedding::backward called before forward");
  if (!tp_) {
    backend_of(store_).encoder_backward(store_.grad(wte_), store_.grad(wpe_), dout, tokens_, B_, T_, C_);
  } else {
    if (sequence_parallel(tp_)) {
      const int64_t N = B_ * T_;
      tp_->all_gather(dout, seq_.raw(), static_cast<size_t>(N / tp_->size() * C_));  // (N/TP, C) -> (N, C)
      dout = seq_.raw();
    }
    backend_of(store_).embedding_rows_backward(store_.grad(wte_), dout, tokens_, v0_, V_rows_, B_ * T_, C_);
    backend_of(store_).position_add_backward(store_.grad(wpe_), dout, B_, T_, C_);
  }
  // Last: with tied weights the output layer wrote dwte earlier in backward.
  store_.grad_ready(wpe_);
  store_.grad_ready(wte_);
}

}  // namespace meshtrain::nn
