#include "meshtrain/kernels/cuda/cuda_backend.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <bit>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "meshtrain/core/error.hpp"
#include "meshtrain/kernels/cuda/adamw.hpp"
#include "meshtrain/kernels/cuda/attention.hpp"
#include "meshtrain/kernels/cuda/bf16_convert.hpp"
#include "meshtrain/kernels/cuda/classifier.hpp"
#include "meshtrain/kernels/cuda/chunk_norm.hpp"
#include "meshtrain/kernels/cuda/chunk_table.hpp"
#include "meshtrain/kernels/cuda/cuda_check.hpp"
#include "meshtrain/kernels/cuda/cuda_memory.hpp"
#include "meshtrain/kernels/cuda/embedding_shard.hpp"
#include "meshtrain/kernels/cuda/encoder.hpp"
#include "meshtrain/kernels/cuda/gelu.hpp"
#include "meshtrain/kernels/cuda/lamb.hpp"
#include "meshtrain/kernels/cuda/layernorm.hpp"
#include "meshtrain/kernels/cuda/matmul.hpp"
#include "meshtrain/kernels/cuda/momentum.hpp"
#include "meshtrain/kernels/norm.hpp"
#include "meshtrain/kernels/cuda/positions.hpp"
#include "meshtrain/kernels/cuda/residual.hpp"
#include "meshtrain/kernels/cuda/routed_rows.hpp"
#include "meshtrain/kernels/cuda/rows.hpp"
#include "meshtrain/kernels/cuda/vision.hpp"
#include "meshtrain/kernels/cuda/vocab_shard.hpp"
#include "meshtrain/kernels/device_probe.hpp"

namespace meshtrain::kernels::cuda {
namespace {

cudaStream_t make_stream(int index) {
  open_cuda_device(Device{DeviceKind::Cuda, index});
  cudaStream_t stream = nullptr;
  MESHTRAIN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  return stream;
}

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int index) : index_(index), stream_(make_stream(index)), memory_(stream_) {}

  Device device() const override { return {DeviceKind::Cuda, index_}; }
  DeviceAllocator& allocator() override { return memory_; }
  int64_t host_syncs() const override { return memory_.downloads(); }
  void finish() override { MESHTRAIN_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

  void encoder_forward(float* out, const int32_t* tokens, const float* wte, const float* wpe, int64_t B, int64_t T,
                       int64_t C) override {
    cuda::encoder_forward(out, tokens, wte, wpe, B, T, C, stream_);
  }
  void encoder_backward(float* dwte, float* dwpe, const float* dout, const int32_t* tokens, int64_t B, int64_t T,
                        int64_t C) override {
    const size_t bytes = encoder_backward_workspace_bytes(B, T);
    cuda::encoder_backward(dwte, dwpe, dout, tokens, B, T, C, scratch(encoder_scratch_, bytes), bytes, stream_);
  }
  void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                         const float* bias, int64_t N, int64_t C) override {
    cuda::layernorm_forward(out, mean, rstd, inp, weight, bias, N, C, stream_);
  }
  void layernorm_forward_rounded(Bf16* out16, float* mean, float* rstd, const float* inp, const float* weight,
                                 const float* bias, int64_t N, int64_t C) override {
    cuda::layernorm_forward_rounded(out16, mean, rstd, inp, weight, bias, N, C, stream_);
  }
  void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                          const float* weight, const float* mean, const float* rstd, const float* dresid, int64_t N,
                          int64_t C) override {
    const size_t bytes = size_t(layernorm_backward_scratch_floats(N, C)) * sizeof(float);
    cuda::layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, dresid, N, C,
                             static_cast<float*>(scratch(layernorm_scratch_, bytes)), stream_);
  }
  void residual_forward(float* out, const float* a, const float* b, int64_t n) override {
    cuda::residual_forward(out, a, b, n, stream_);
  }
  void gelu_forward(float* out, const float* inp, int64_t n) override { cuda::gelu_forward(out, inp, n, stream_); }
  void gelu_backward(float* dinp, const float* inp, const float* dout, int64_t n) override {
    cuda::gelu_backward(dinp, inp, dout, n, stream_);
  }
  void adamw_update(std::span<const kernels::AdamWChunk> chunks, const AdamWStep& step) override;
  void momentum_squares(std::span<const MomentumChunk> chunks, double* sums) override {
    const MomentumChunk* table = momentum_table_.on_device(chunks, memory_);
    chunk_sums_to_host(chunks.size(), sums, [&](double* on_device) {
      cuda::momentum_squares(table, int64_t(chunks.size()), on_device, stream_);
    });
  }
  void momentum_update(std::span<const MomentumChunk> chunks, std::span<const float> trusts,
                       const MomentumStep& step) override {
    const MomentumChunk* table = momentum_table_.on_device(chunks, memory_);
    cuda::momentum_update(table, int64_t(chunks.size()), momentum_table_.max_size(), per_view(trusts), step,
                          stream_);
  }
  void lamb_moments(std::span<const LambChunk> chunks, const LambStep& step, double* sums) override {
    const LambChunk* table = lamb_table_.on_device(chunks, memory_);
    chunk_sums_to_host(chunks.size(), sums, [&](double* on_device) {
      cuda::lamb_moments(table, int64_t(chunks.size()), step, on_device, stream_);
    });
  }
  void lamb_apply(std::span<const LambChunk> chunks, std::span<const float> scales, const LambStep& step) override {
    const LambChunk* table = lamb_table_.on_device(chunks, memory_);
    cuda::lamb_apply(table, int64_t(chunks.size()), lamb_table_.max_size(), per_view(scales), step, stream_);
  }
  // The chunks' sums on the device, added in chunk order on the host (the
  // CPU's bits, norm.hpp): a wait for the device.
  double squared_norm(const float* base, size_t begin, size_t end) override {
    const Range range{begin, end};
    double sum = 0;
    squared_norms(base, {&range, 1}, &sum);
    return sum;
  }
  // Every range's chunk sums into one scratch, one download, each range's
  // chunks added in order as squared_norm adds them.
  void squared_norms(const float* base, std::span<const Range> ranges, double* out) override {
    std::vector<int64_t> first(ranges.size() + 1, 0);
    for (size_t i = 0; i < ranges.size(); ++i)
      first[i + 1] = first[i] + squared_norm_chunks(ranges[i].begin, ranges[i].end);
    if (first.back() == 0) {
      std::fill(out, out + ranges.size(), 0.0);
      return;
    }
    const size_t bytes = size_t(first.back()) * sizeof(double);
    auto* partials = static_cast<double*>(scratch(norm_scratch_, bytes));
    for (size_t i = 0; i < ranges.size(); ++i)
      if (first[i + 1] > first[i])
        chunk_sum_squares(partials + first[i], base, ranges[i].begin, ranges[i].end, stream_);
    std::vector<double> host(size_t(first.back()));
    memory_.download(host.data(), partials, bytes);
    for (size_t i = 0; i < ranges.size(); ++i) {
      double sum = 0;
      for (int64_t c = first[i]; c < first[i + 1]; ++c) sum += host[size_t(c)];
      out[i] = sum;
    }
  }
  void scale(float* x, size_t n, float factor) override { cuda::scale(x, int64_t(n), factor, stream_); }
  // A loss's rows and hits (a few thousand each): one download, added in
  // order on the host.
  void sums_in_order(const float* x, size_t n, size_t parts, double* sums) override {
    std::vector<float> host(n * parts);
    if (!host.empty()) memory_.download(host.data(), x, host.size() * sizeof(float));
    kernels::sums_in_order(host.data(), n, parts, sums);
  }

  // Products: the general form of the context's (matmul.hpp), sums in
  // fp32 (no TF32), one algorithm per product kept; an empty product (K = 0)
  // is C = beta C [+ bias], as on the CPU.
  void gemm(Trans ta, Trans tb, int M, int N, int K, float alpha, const float* A, int lda, const float* B, int ldb,
            float beta, float* C, int ldc) override {
    if (M <= 0 || N <= 0) return;
    if (K <= 0) return cuda::scale_add_bias_rows(C, ldc, beta, nullptr, M, N, stream_);
    matmul().gemm(ta, tb, M, N, K, alpha, DevicePtr<const float>(A), lda, DevicePtr<const float>(B), ldb, beta,
                  DevicePtr<float>(C), ldc);
  }
  void gemm_bf16(Trans ta, Trans tb, int M, int N, int K, float alpha, const Bf16* A, int lda, const Bf16* B,
                 int ldb, float beta, float* C, int ldc, const float* bias) override {
    if (M <= 0 || N <= 0) return;
    if (K <= 0) return cuda::scale_add_bias_rows(C, ldc, beta, bias, M, N, stream_);
    matmul().gemm(ta, tb, M, N, K, alpha, DevicePtr<const Bf16>(A), lda, DevicePtr<const Bf16>(B), ldb, beta,
                  DevicePtr<float>(C), ldc, bias ? MatmulInput(DevicePtr<const float>(bias)) : MatmulInput());
  }
  void gemm_bf16_rounded(Trans ta, Trans tb, int M, int N, int K, const Bf16* A, int lda, const Bf16* B, int ldb,
                         Bf16* C, int ldc, const float* bias) override {
    if (M <= 0 || N <= 0) return;
    if (K <= 0) return cuda::bias_rows_bf16(C, ldc, bias, M, N, stream_);
    matmul().gemm(ta, tb, M, N, K, 1.0f, DevicePtr<const Bf16>(A), lda, DevicePtr<const Bf16>(B), ldb, 0.0f,
                  DevicePtr<Bf16>(C), ldc, bias ? MatmulInput(DevicePtr<const float>(bias)) : MatmulInput());
  }
  // One stream: the two run one after the other.
  void run_pair(FunctionRef<void()> first, FunctionRef<void()> after_first, FunctionRef<void()> second) override {
    first();
    after_first();
    second();
  }

  void fill_rows(float* out, const float* bias, const float* residual, int64_t M, int64_t N) override {
    cuda::fill_rows(out, bias, residual, M, N, stream_);
  }
  void add_rows(float* out, const float* bias, const float* residual, int64_t M, int64_t N) override {
    cuda::add_rows(out, bias, residual, M, N, stream_);
  }
  void bias_backward(float* dbias, const float* dout, int64_t M, int64_t N) override {
    cuda::bias_backward(dbias, dout, M, N, column_scratch(M, N), stream_);
  }
  void bias_backward_rounded(float* dbias, Bf16* dout16, const float* dout, int64_t M, int64_t N) override {
    cuda::bias_backward_rounded(dbias, dout16, dout, M, N, column_scratch(M, N), stream_);
  }
  void gelu_forward_bf16(Bf16* out16, const Bf16* inp16, int64_t n) override {
    cuda::gelu_forward_bf16(out16, inp16, n, stream_);
  }
  void gelu_backward_rounded(Bf16* dinp16, float* dbias, const Bf16* inp, const Bf16* dout, int64_t M,
                             int64_t N) override {
    cuda::gelu_backward_rounded(dinp16, dbias, inp, dout, M, N, dbias ? column_scratch(M, N) : nullptr, stream_);
  }
  void to_bf16(const float* src, Bf16* dst, size_t n) override { cuda::to_bf16(src, dst, int64_t(n), stream_); }
  void widen_divided(const Bf16* src, float* dst, size_t n, float divisor) override {
    cuda::widen_divided(src, dst, int64_t(n), divisor, stream_);
  }
  void copy(float* dst, const float* src, size_t n) override {
    MESHTRAIN_CUDA_CHECK(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToDevice, stream_));
  }
  void fill(float* dst, size_t n, float value) override {
    if (std::bit_cast<uint32_t>(value) == 0u)  // +0 only: -0 has a sign bit to keep
      MESHTRAIN_CUDA_CHECK(cudaMemsetAsync(dst, 0, n * sizeof(float), stream_));
    else
      cuda::fill(dst, int64_t(n), value, stream_);
  }

  // Flash-style (attention.hpp here): `saved` keeps only the log-sum-exp
  // (B, NH, T) in f32, backward reads forward's output and recomputes the
  // probabilities tile by tile, so there is nothing to recompute.
  void attention_forward(float* out, AttentionSaved& saved, const float* qkv, int64_t B, int64_t T, int64_t C,
                         int64_t NH, bool causal, const AttentionBf16* bf16) override {
    const size_t rows = size_t(B * NH * T);
    saved.lse.ensure(rows);
    float* lse = saved.lse.raw();
    if (bf16)
      cuda::attention_forward(bf16->out, lse, bf16->qkv, B, T, C, NH, causal, stream_);
    else
      cuda::attention_forward(out, lse, qkv, B, T, C, NH, causal, stream_);
  }
  void attention_recompute(AttentionSaved&, const float*, int64_t, int64_t, int64_t, int64_t, bool,
                           const AttentionBf16*) override {}
  void attention_backward(float* dqkv, const float* dout, const float* out, AttentionSaved& saved, const float* qkv,
                          int64_t B, int64_t T, int64_t C, int64_t NH, bool causal, float* scratch,
                          const AttentionBf16* bf16) override {
    if (bf16)
      cuda::attention_backward(dqkv, scratch, bf16->dout, bf16->out, saved.lse.raw(), bf16->qkv, B, T, C, NH,
                               causal, stream_);
    else
      cuda::attention_backward(dqkv, scratch, dout, out, saved.lse.raw(), qkv, B, T, C, NH, causal, stream_);
  }
  size_t attention_backward_scratch(const AttentionSaved&, int64_t B, int64_t T, int64_t NH, bool) override {
    return size_t(attention_backward_scratch_floats(B, T, NH));
  }

  // The loss through the fused classifier (classifier.hpp), which never
  // stores the probabilities: forward without the gradient, backward with
  // it (one more read of the logits than a single fused pass). The hits
  // stay on the device, beside the loss's rows, until sums_in_order.
  void softmax_xent_forward(float* lse, float* loss, float* hit, const float* logits, const int32_t* targets, int64_t N,
                            int64_t V) override {
    cuda::fused_classifier(lse, loss, hit, nullptr, logits, targets, N, V, 0.0f, stream_);
  }
  void softmax_xent_backward(float* dlogits, const float* logits, const float* lse, const int32_t* targets, int64_t N,
                             int64_t V, float dloss, int64_t v0) override {
    if (v0 != 0) return cuda::softmax_xent_shard_backward(dlogits, logits, lse, targets, N, V, dloss, v0, stream_);
    auto* rows = static_cast<float*>(scratch(loss_scratch_, 2 * size_t(N) * sizeof(float)));  // lse, loss again
    cuda::fused_classifier(rows, rows + N, nullptr, dlogits, logits, targets, N, V, dloss, stream_);
  }
  // The vocabulary-parallel loss (vocab_shard.hpp).
  void row_max_argmax(float* mx, int32_t* arg, const float* logits, int64_t N, int64_t V) override {
    cuda::row_max_argmax(mx, arg, logits, N, V, stream_);
  }
  void softmax_xent_shard_sums(float* sumexp, float* target_logit, const float* logits, const float* mx,
                               const int32_t* targets, int64_t N, int64_t V, int64_t v0) override {
    cuda::softmax_xent_shard_sums(sumexp, target_logit, logits, mx, targets, N, V, v0, stream_);
  }
  void shard_argmax_candidates(int32_t* arg, const float* local_max, const float* mx, int64_t N, int64_t v0,
                               int64_t V) override {
    cuda::shard_argmax_candidates(arg, local_max, mx, N, v0, V, stream_);
  }
  void shard_loss_rows(float* lse, float* loss, float* hit, const float* mx, const float* sumexp,
                       const float* target_logit, const int32_t* arg, const int32_t* targets, int64_t N) override {
    cuda::shard_loss_rows(lse, loss, hit, mx, sumexp, target_logit, arg, targets, N, stream_);
  }
  // Tensor parallelism's and the ViT's.
  void embedding_rows_forward(float* out, const int32_t* tokens, const float* wte_rows, int64_t v0, int64_t V_rows,
                              int64_t N, int64_t C) override {
    cuda::embedding_rows_forward(out, tokens, wte_rows, v0, V_rows, N, C, stream_);
  }
  void embedding_rows_backward(float* dwte_rows, const float* dout, const int32_t* tokens, int64_t v0,
                               int64_t V_rows, int64_t N, int64_t C) override {
    const size_t bytes = embedding_rows_backward_workspace_bytes(N, V_rows);
    cuda::embedding_rows_backward(dwte_rows, dout, tokens, v0, V_rows, N, C, scratch(embedding_scratch_, bytes),
                                  bytes, stream_);
  }
  void position_add_forward(float* x, const float* pos, int64_t B, int64_t T, int64_t C) override {
    cuda::position_add_forward(x, pos, B, T, C, stream_);
  }
  void position_add_rows_forward(float* x, const float* pos, int64_t row0, int64_t rows, int64_t T,
                                 int64_t C) override {
    cuda::position_add_rows_forward(x, pos, row0, rows, T, C, stream_);
  }
  void position_add_backward(float* dpos, const float* dout, int64_t B, int64_t T, int64_t C) override {
    cuda::position_add_backward(dpos, dout, B, T, C, stream_);
  }
  void patchify(float* patches, const float* pixels, int64_t B, int64_t ch, int64_t H, int64_t W,
                int64_t P) override {
    cuda::patchify(patches, pixels, B, ch, H, W, P, stream_);
  }
  void meanpool_forward(float* out, const float* inp, int64_t B, int64_t T, int64_t C) override {
    cuda::meanpool_forward(out, inp, B, T, C, stream_);
  }
  void meanpool_backward(float* dinp, const float* dout, int64_t B, int64_t T, int64_t C) override {
    cuda::meanpool_backward(dinp, dout, B, T, C, stream_);
  }
  void gather_rows(float* dst, const float* src, const int32_t* rows, int64_t n, int64_t C) override {
    cuda::gather_rows(dst, src, rows, n, C, stream_);
  }
  void combine_rows(float* out, const float* base, const float* src, const int32_t* offsets, const int32_t* rows,
                    const float* scales, int64_t N, int64_t C) override {
    cuda::combine_rows(out, base, src, offsets, rows, scales, N, C, stream_);
  }
  void gate_backward_rows(float* dy, float* dgates, const float* dout, const float* y, const int32_t* tokens,
                          const float* gates, int64_t n, int64_t C) override {
    cuda::gate_backward_rows(dy, dgates, dout, y, tokens, gates, n, C, stream_);
  }

 private:
  // `buffer` grown to at least `bytes` (device memory, uninitialised).
  void* scratch(DeviceBuffer<std::byte>& buffer, size_t bytes) {
    if (buffer.size() < bytes) buffer = DeviceBuffer<std::byte>(memory_, bytes, MemoryKind::Other);
    return buffer.ptr().raw();
  }
  // `launch` writes two sums per chunk into device scratch; they come to
  // `sums` on the host (the optimizer's one wait).
  template <class Launch>
  void chunk_sums_to_host(size_t chunks, double* sums, Launch launch) {
    const size_t bytes = 2 * chunks * sizeof(double);
    auto* on_device = static_cast<double*>(scratch(norm_scratch_, bytes));
    launch(on_device);
    memory_.download(sums, on_device, bytes);
  }
  // A step's factors, one per view (LARS's trust ratios, LAMB's scales),
  // uploaded from the host; null for none.
  const float* per_view(std::span<const float> factors) {
    if (factors.empty()) return nullptr;
    auto* on_device = static_cast<float*>(scratch(factors_scratch_, factors.size_bytes()));
    memory_.upload(on_device, factors.data(), factors.size_bytes());
    return on_device;
  }
  // The column sums' partials of an (M, N) array (rows.hpp).
  float* column_scratch(int64_t M, int64_t N) {
    const size_t bytes = size_t(column_sums_scratch_floats(M, N)) * sizeof(float);
    return static_cast<float*>(scratch(column_scratch_, bytes));
  }
  // The products' context, made on the first product (its handle and 32 MiB
  // workspace). Never destroyed: the backend lives until exit, where the CUDA
  // runtime may already be gone before a cuBLASLt handle could be destroyed.
  CublasLtContext& matmul() {
    if (!matmul_) matmul_ = new CublasLtContext(memory_);
    return *matmul_;
  }

  int index_;
  cudaStream_t stream_;
  CudaAllocator memory_;
  DeviceBuffer<std::byte> encoder_scratch_, layernorm_scratch_, embedding_scratch_, column_scratch_, norm_scratch_;
  DeviceBuffer<std::byte> loss_scratch_;  // the loss's rows again (2N)
  DeviceBuffer<std::byte> factors_scratch_;  // per_view's
  // The optimizers' chunk tables on the GPU, uploaded again only when the
  // chunks change (chunk_table.hpp).
  std::vector<cuda::AdamWChunk> adamw_chunks_;  // adamw_update's, in the kernel's layout
  ChunkTable<cuda::AdamWChunk> adamw_table_;
  ChunkTable<MomentumChunk> momentum_table_;  // SGD's and LARS's
  ChunkTable<LambChunk> lamb_table_;
  CublasLtContext* matmul_ = nullptr;
};

void CudaBackend::adamw_update(std::span<const kernels::AdamWChunk> chunks, const AdamWStep& step) {
  adamw_chunks_.clear();
  for (const kernels::AdamWChunk& c : chunks)
    adamw_chunks_.push_back({c.param, c.grad, c.m, c.v, int64_t(c.size), c.weight_decay ? 1 : 0});
  const cuda::AdamWChunk* table = adamw_table_.on_device(adamw_chunks_, memory_);
  cuda::adamw_update(table, int64_t(adamw_chunks_.size()), adamw_table_.max_size(), step, nullptr, stream_);
}

}  // namespace

Backend& backend(int index) {
  static std::mutex mutex;
  static std::map<int, std::unique_ptr<CudaBackend>> backends;
  const std::lock_guard lock(mutex);
  std::unique_ptr<CudaBackend>& b = backends[index];
  if (!b) b = std::make_unique<CudaBackend>(index);
  return *b;
}

}  // namespace meshtrain::kernels::cuda

namespace meshtrain::kernels {

Backend& cuda_backend(int index) { return cuda::backend(index); }

}  // namespace meshtrain::kernels
