// The CPU backend: every call is the CPU kernel of the same name, so a model
// run through it computes exactly what it computed calling the kernels
// directly. Its memory is the host's, 64-byte aligned.
#include <omp.h>

#include <algorithm>

#include "meshtrain/core/host_memory.hpp"
#include "meshtrain/kernels/adamw.hpp"
#include "meshtrain/kernels/lamb.hpp"
#include "meshtrain/kernels/momentum.hpp"
#include "meshtrain/kernels/attention.hpp"
#include "meshtrain/kernels/backend.hpp"
#include "meshtrain/kernels/bf16.hpp"
#include "meshtrain/kernels/cross_entropy.hpp"
#include "meshtrain/kernels/elementwise.hpp"
#include "meshtrain/kernels/embedding.hpp"
#include "meshtrain/kernels/flash_attention.hpp"
#include "meshtrain/kernels/gemm.hpp"
#include "meshtrain/kernels/gemm_bf16.hpp"
#include "meshtrain/kernels/guarded_backend.hpp"
#include "meshtrain/kernels/layernorm.hpp"
#include "meshtrain/kernels/norm.hpp"
#include "meshtrain/kernels/routed_rows.hpp"

namespace meshtrain::kernels {
namespace {

class CpuBackend final : public Backend {
 public:
  Device device() const override { return {}; }
  DeviceAllocator& allocator() override { return host_memory(); }  // aligned, huge pages (core/host_memory.hpp)

  void encoder_forward(float* out, const int32_t* tokens, const float* wte, const float* wpe, int64_t B, int64_t T,
                       int64_t C) override {
    kernels::encoder_forward(out, tokens, wte, wpe, B, T, C);
  }
  void encoder_backward(float* dwte, float* dwpe, const float* dout, const int32_t* tokens, int64_t B, int64_t T,
                        int64_t C) override {
    kernels::encoder_backward(dwte, dwpe, dout, tokens, B, T, C);
  }
  void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight, const float* bias,
                         int64_t N, int64_t C) override {
    kernels::layernorm_forward(out, mean, rstd, inp, weight, bias, N, C);
  }
  void layernorm_forward_rounded(Bf16* out16, float* mean, float* rstd, const float* inp, const float* weight,
                                 const float* bias, int64_t N, int64_t C) override {
    kernels::layernorm_forward_rounded(out16, mean, rstd, inp, weight, bias, N, C);
  }
  void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                          const float* weight, const float* mean, const float* rstd, const float* dresid, int64_t N,
                          int64_t C) override {
    kernels::layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, dresid, N, C);
  }
  void residual_forward(float* out, const float* a, const float* b, int64_t n) override {
    kernels::residual_forward(out, a, b, n);
  }
  void gelu_forward(float* out, const float* inp, int64_t n) override { kernels::gelu_forward(out, inp, n); }
  void gelu_backward(float* dinp, const float* inp, const float* dout, int64_t n) override {
    kernels::gelu_backward(dinp, inp, dout, n);
  }
  void adamw_update(std::span<const AdamWChunk> chunks, const AdamWStep& step) override {
    kernels::adamw_update(chunks, step);
  }
  void momentum_squares(std::span<const MomentumChunk> chunks, double* sums) override {
    kernels::momentum_squares(chunks, sums);
  }
  void momentum_update(std::span<const MomentumChunk> chunks, std::span<const float> trusts,
                       const MomentumStep& step) override {
    kernels::momentum_update(chunks, trusts.empty() ? nullptr : trusts.data(), step);
  }
  void lamb_moments(std::span<const LambChunk> chunks, const LambStep& step, double* sums) override {
    kernels::lamb_moments(chunks, step, sums);
  }
  void lamb_apply(std::span<const LambChunk> chunks, std::span<const float> scales, const LambStep& step) override {
    kernels::lamb_apply(chunks, scales.data(), step);
  }
  double squared_norm(const float* base, size_t begin, size_t end) override {
    return kernels::squared_norm(base, begin, end);
  }
  void scale(float* x, size_t n, float factor) override { kernels::scale(x, n, factor); }
  void sums_in_order(const float* x, size_t n, size_t parts, double* sums) override {
    kernels::sums_in_order(x, n, parts, sums);
  }

  void gemm(Trans ta, Trans tb, int M, int N, int K, float alpha, const float* A, int lda, const float* B, int ldb,
            float beta, float* C, int ldc) override {
    kernels::gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  }
  void gemm_bf16(Trans ta, Trans tb, int M, int N, int K, float alpha, const Bf16* A, int lda, const Bf16* B, int ldb,
                 float beta, float* C, int ldc, const float* bias) override {
    kernels::gemm_bf16(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, bias);
  }
  void gemm_bf16_rounded(Trans ta, Trans tb, int M, int N, int K, const Bf16* A, int lda, const Bf16* B, int ldb,
                         Bf16* C, int ldc, const float* bias) override {
    kernels::gemm_bf16_rounded(ta, tb, M, N, K, A, lda, B, ldb, C, ldc, bias);
  }
  void run_pair(FunctionRef<void()> first, FunctionRef<void()> after_first, FunctionRef<void()> second) override;

  void fill_rows(float* out, const float* bias, const float* residual, int64_t M, int64_t N) override {
    kernels::fill_rows(out, bias, residual, M, N);
  }
  void add_rows(float* out, const float* bias, const float* residual, int64_t M, int64_t N) override {
    kernels::add_rows(out, bias, residual, M, N);
  }
  void bias_backward(float* dbias, const float* dout, int64_t M, int64_t N) override {
    kernels::bias_backward(dbias, dout, M, N);
  }
  void bias_backward_rounded(float* dbias, Bf16* dout16, const float* dout, int64_t M, int64_t N) override {
    kernels::bias_backward_rounded(dbias, dout16, dout, M, N);
  }
  void gelu_forward_bf16(Bf16* out16, const Bf16* inp16, int64_t n) override {
    kernels::gelu_forward_bf16(out16, inp16, n);
  }
  void gelu_backward_rounded(Bf16* dinp16, float* dbias, const Bf16* inp, const Bf16* dout, int64_t M,
                             int64_t N) override {
    kernels::gelu_backward_rounded(dinp16, dbias, inp, dout, M, N);
  }
  void to_bf16(const float* src, Bf16* dst, size_t n) override { kernels::to_bf16(src, dst, n); }
  void widen_divided(const Bf16* src, float* dst, size_t n, float divisor) override {
    kernels::widen_divided(src, dst, n, divisor);
  }
  void copy(float* dst, const float* src, size_t n) override { std::copy(src, src + n, dst); }
  void fill(float* dst, size_t n, float value) override { std::fill(dst, dst + n, value); }

  // The probabilities kernel saves (B, NH, T, T): fp32, or bf16 under bf16
  // products; the flash kernel the log-sum-exp (B, NH, T).
  void attention_forward(float* out, AttentionSaved& saved, const float* qkv, int64_t B, int64_t T, int64_t C,
                         int64_t NH, bool causal, const AttentionBf16* bf16) override {
    if (saved.kernel == AttentionKernel::Flash) {
      saved.lse.ensure(size_t(B * NH * T));
      kernels::flash_attention_forward(out, saved.lse.raw(), qkv, B, T, C, NH, causal, bf16);
      return;
    }
    const size_t probs = size_t(B * NH * T * T);
    if (bf16) {
      AttentionBf16 b = *bf16;
      saved.b16.ensure(probs);
      b.att = saved.b16.raw();
      kernels::attention_forward(nullptr, nullptr, nullptr, B, T, C, NH, causal, &b);
    } else {
      saved.f32.ensure(probs);
      kernels::attention_forward(out, saved.f32.raw(), qkv, B, T, C, NH, causal);
    }
  }
  // The flash kernel's log-sum-exp is the layer's own, never pooled: nothing to redo.
  void attention_recompute(AttentionSaved& saved, const float* qkv, int64_t B, int64_t T, int64_t C, int64_t NH,
                           bool causal, const AttentionBf16* bf16) override {
    if (saved.kernel == AttentionKernel::Flash) return;
    if (bf16) {
      AttentionBf16 b = *bf16;
      b.out = nullptr;  // the probabilities only
      attention_forward(nullptr, saved, nullptr, B, T, C, NH, causal, &b);
    } else {
      attention_forward(nullptr, saved, qkv, B, T, C, NH, causal, nullptr);
    }
  }
  void attention_backward(float* dqkv, const float* dout, const float* out, AttentionSaved& saved, const float* qkv,
                          int64_t B, int64_t T, int64_t C, int64_t NH, bool causal, float* scratch,
                          const AttentionBf16* bf16) override {
    if (saved.kernel == AttentionKernel::Flash) {
      kernels::flash_attention_backward(dqkv, dout, out, saved.lse.raw(), qkv, B, T, C, NH, causal, bf16);
    } else if (bf16) {
      AttentionBf16 b = *bf16;
      b.att = saved.b16.raw();
      kernels::attention_backward(dqkv, nullptr, nullptr, nullptr, nullptr, B, T, C, NH, causal, &b);
    } else {
      kernels::attention_backward(dqkv, scratch, dout, saved.f32.raw(), qkv, B, T, C, NH, causal);
    }
  }
  // fp32 probabilities keep the score gradients (B, NH, T, T); bf16 a
  // per-thread row block of its own, and flash per-thread blocks.
  size_t attention_backward_scratch(const AttentionSaved& saved, int64_t B, int64_t T, int64_t NH,
                                    bool bf16) override {
    return bf16 || saved.kernel == AttentionKernel::Flash ? 0 : size_t(B * NH * T * T);
  }

  void softmax_xent_forward(float* lse, float* loss, float* hit, const float* logits, const int32_t* targets, int64_t N,
                            int64_t V) override {
    kernels::softmax_xent_forward(lse, loss, hit, logits, targets, N, V);
  }
  void softmax_xent_backward(float* dlogits, const float* logits, const float* lse, const int32_t* targets, int64_t N,
                             int64_t V, float dloss, int64_t v0) override {
    kernels::softmax_xent_backward(dlogits, logits, lse, targets, N, V, dloss, v0);
  }
  void row_max_argmax(float* mx, int32_t* arg, const float* logits, int64_t N, int64_t V) override {
    kernels::row_max_argmax(mx, arg, logits, N, V);
  }
  void softmax_xent_shard_sums(float* sumexp, float* target_logit, const float* logits, const float* mx,
                               const int32_t* targets, int64_t N, int64_t V, int64_t v0) override {
    kernels::softmax_xent_shard_sums(sumexp, target_logit, logits, mx, targets, N, V, v0);
  }
  void shard_argmax_candidates(int32_t* arg, const float* local_max, const float* mx, int64_t N, int64_t v0,
                               int64_t V) override {
    kernels::shard_argmax_candidates(arg, local_max, mx, N, v0, V);
  }
  void shard_loss_rows(float* lse, float* loss, float* hit, const float* mx, const float* sumexp,
                       const float* target_logit, const int32_t* arg, const int32_t* targets, int64_t N) override {
    kernels::shard_loss_rows(lse, loss, hit, mx, sumexp, target_logit, arg, targets, N);
  }

  void embedding_rows_forward(float* out, const int32_t* tokens, const float* wte_rows, int64_t v0, int64_t V_rows,
                              int64_t N, int64_t C) override {
    kernels::embedding_rows_forward(out, tokens, wte_rows, v0, V_rows, N, C);
  }
  void embedding_rows_backward(float* dwte_rows, const float* dout, const int32_t* tokens, int64_t v0, int64_t V_rows,
                               int64_t N, int64_t C) override {
    kernels::embedding_rows_backward(dwte_rows, dout, tokens, v0, V_rows, N, C);
  }
  void position_add_forward(float* x, const float* pos, int64_t B, int64_t T, int64_t C) override {
    kernels::position_add_forward(x, pos, B, T, C);
  }
  void position_add_rows_forward(float* x, const float* pos, int64_t row0, int64_t rows, int64_t T,
                                 int64_t C) override {
    kernels::position_add_rows_forward(x, pos, row0, rows, T, C);
  }
  void position_add_backward(float* dpos, const float* dout, int64_t B, int64_t T, int64_t C) override {
    kernels::position_add_backward(dpos, dout, B, T, C);
  }
  void patchify(float* patches, const float* pixels, int64_t B, int64_t ch, int64_t H, int64_t W, int64_t P) override {
    kernels::patchify(patches, pixels, B, ch, H, W, P);
  }
  void meanpool_forward(float* out, const float* inp, int64_t B, int64_t T, int64_t C) override {
    kernels::meanpool_forward(out, inp, B, T, C);
  }
  void meanpool_backward(float* dinp, const float* dout, int64_t B, int64_t T, int64_t C) override {
    kernels::meanpool_backward(dinp, dout, B, T, C);
  }
  void gather_rows(float* dst, const float* src, const int32_t* rows, int64_t n, int64_t C) override {
    kernels::gather_rows(dst, src, rows, n, C);
  }
  void combine_rows(float* out, const float* base, const float* src, const int32_t* offsets, const int32_t* rows,
                    const float* scales, int64_t N, int64_t C) override {
    kernels::combine_rows(out, base, src, offsets, rows, scales, N, C);
  }
  void gate_backward_rows(float* dy, float* dgates, const float* dout, const float* y, const int32_t* tokens,
                          const float* gates, int64_t n, int64_t C) override {
    kernels::gate_backward_rows(dy, dgates, dout, y, tokens, gates, n, C);
  }

 private:
};

// The thread rule of a linear layer's backward lives here, with the
// kernels: on exactly 2 threads the two GEMMs run one per thread, which
// measured faster than splitting each across both (small GEMMs such as
// 1024x256x256 scale poorly when split); inside a parallel region gemm()
// runs on its calling thread.
void CpuBackend::run_pair(FunctionRef<void()> first, FunctionRef<void()> after_first, FunctionRef<void()> second) {
  if (!omp_in_parallel() && omp_get_max_threads() == 2) {
#pragma omp parallel num_threads(2)
    {
      if (omp_get_thread_num() == 0)
        first();
      else
        second();
    }
    after_first();
    return;
  }
  first();
  after_first();
  second();
}

}  // namespace

Backend& cpu_backend() {
  static CpuBackend backend;
  return backend;
}

Backend& backend_for(const Device& device) {
  switch (device.kind) {
    case DeviceKind::Cpu: return cpu_backend();
    case DeviceKind::GuardedCpu: return guarded_backend();
    case DeviceKind::Cuda: break;
  }
  return cuda_backend(device.index);
}

}  // namespace meshtrain::kernels
