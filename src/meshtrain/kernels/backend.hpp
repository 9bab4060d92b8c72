#pragma once
// The kernels of one device behind one interface, so that one model
// definition runs on every device: a layer asks the backend of its store's
// device (backend_for(store.device())) instead of calling a CPU kernel by
// name. The CPU backend is today's kernels with their bits; the CUDA backend
// (cuda/cuda_backend.cpp) launches the CUDA twins on its stream.
//
// Pointers are in the backend's memory: host memory for the CPU, device
// memory (DeviceBuffer's raw pointers) for a GPU. Every call is ordered
// after the calls before it on the same backend; only those that return a
// value to the host (squared_norm, the loss's) wait for the device.
//
// Every kernel the layers call is here. A GPU backend that has no twin for
// one yet throws DeviceError naming it (docs/gpu.md lists them).
#include <cstddef>
#include <cstdint>
#include <span>

#include "meshtrain/core/bf16.hpp"
#include "meshtrain/core/device.hpp"
#include "meshtrain/core/device_array.hpp"
#include "meshtrain/core/device_buffer.hpp"
#include "meshtrain/core/function_ref.hpp"
#include "meshtrain/kernels/adamw_math.hpp"
#include "meshtrain/kernels/attention.hpp"
#include "meshtrain/kernels/attention_kernel.hpp"
#include "meshtrain/kernels/gemm.hpp"
#include "meshtrain/kernels/lamb_math.hpp"
#include "meshtrain/kernels/momentum_math.hpp"

namespace meshtrain::kernels {

// One run of an AdamW update: parameters, gradients and both moments,
// `size` elements each (optim/chunks.hpp cuts them).
// What attention's forward keeps for its backward, laid out by the backend
// that runs it: the CPU's probabilities kernel keeps (B, NH, T, T), in `f32`
// or, under bf16 products, `b16` (which a recomputation pool may hold
// instead: nn/recompute.hpp); a flash-style kernel keeps only the per-row
// log-sum-exp (B, NH, T) in `lse`. All in the backend's memory; the layer
// holds it, chooses `kernel`, and never reads it.
struct AttentionSaved {
  explicit AttentionSaved(DeviceAllocator& memory)
      : f32(memory, MemoryKind::Activations),
        b16(memory, MemoryKind::Activations),
        lse(memory, MemoryKind::Activations) {}
  DeviceArray<float> f32;
  DeviceArray<Bf16> b16;
  DeviceArray<float> lse;
  AttentionKernel kernel = AttentionKernel::Probabilities;
};

struct AdamWChunk {
  float* param;
  const float* grad;
  float* m;  // exp_avg
  float* v;  // exp_avg_sq
  size_t size;
  bool weight_decay;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;
  // The memory this backend's kernels read and write.
  virtual DeviceAllocator& allocator() = 0;
  // Host synchronisations so far: each time the host waited for a value of
  // the device's memory (a download; a call that returns a norm, a sum or a
  // count). A step should wait only for its loss and its gradient norm
  // (docs/gpu.md); the trainer reports each step's as "host_syncs". Counted
  // by the devices whose memory is not the host's (cpu-guarded, cuda); -1
  // on the CPU, where there is nothing to wait for.
  virtual int64_t host_syncs() const { return -1; }
  // Returns once the device has run every kernel queued so far, for a caller
  // that times the device's work (plan --config's probe); a step never calls
  // it. The CPU's kernels have returned when their calls do.
  virtual void finish() {}

  // Token and position embedding (embedding.hpp): out (B, T, C); the
  // backward adds into dwte (V, C) and dwpe (T, C).
  virtual void encoder_forward(float* out, const int32_t* tokens, const float* wte, const float* wpe, int64_t B,
                               int64_t T, int64_t C) = 0;
  virtual void encoder_backward(float* dwte, float* dwpe, const float* dout, const int32_t* tokens, int64_t B,
                                int64_t T, int64_t C) = 0;

  // Layer normalization (layernorm.hpp).
  virtual void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                                 const float* bias, int64_t N, int64_t C) = 0;
  virtual void layernorm_forward_rounded(Bf16* out16, float* mean, float* rstd, const float* inp, const float* weight,
                                         const float* bias, int64_t N, int64_t C) = 0;
  virtual void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                                  const float* weight, const float* mean, const float* rstd, const float* dresid,
                                  int64_t N, int64_t C) = 0;

  // Element-wise (elementwise.hpp): out = a + b; GELU and its gradient.
  virtual void residual_forward(float* out, const float* a, const float* b, int64_t n) = 0;
  virtual void gelu_forward(float* out, const float* inp, int64_t n) = 0;
  virtual void gelu_backward(float* dinp, const float* inp, const float* dout, int64_t n) = 0;

  // AdamW over every chunk (adamw_math.hpp's element step).
  virtual void adamw_update(std::span<const AdamWChunk> chunks, const AdamWStep& step) = 0;
  // SGD and LARS (momentum.hpp). momentum_squares returns each chunk's sums
  // of squares of parameters and gradients to the host, two per chunk in
  // `sums` (LARS's trust ratios need them there: one wait); trusts are one
  // per view, in host memory, or empty for 1 (SGD).
  virtual void momentum_squares(std::span<const MomentumChunk> chunks, double* sums) = 0;
  virtual void momentum_update(std::span<const MomentumChunk> chunks, std::span<const float> trusts,
                               const MomentumStep& step) = 0;
  // LAMB's two passes (lamb.hpp): the moments with each chunk's sums of
  // squares of w and u returned to the host (one wait), then the update
  // with one scale per view (host memory).
  virtual void lamb_moments(std::span<const LambChunk> chunks, const LambStep& step, double* sums) = 0;
  virtual void lamb_apply(std::span<const LambChunk> chunks, std::span<const float> scales,
                          const LambStep& step) = 0;
  // The sum of squares of base[begin, end) (norm.hpp's chunks on the CPU),
  // returned to the host: one of a step's two waits for the device (the
  // other is the loss).
  virtual double squared_norm(const float* base, size_t begin, size_t end) = 0;
  // The same for many ranges of base, out[i] = squared_norm(base, ranges[i])
  // bit for bit, returned together: one wait for them all (a tensor-parallel
  // norm's views by placement, a hundred or more a step).
  struct Range {
    size_t begin, end;
  };
  virtual void squared_norms(const float* base, std::span<const Range> ranges, double* out) {
    for (size_t i = 0; i < ranges.size(); ++i) out[i] = squared_norm(base, ranges[i].begin, ranges[i].end);
  }
  // x[0, n) *= factor.
  virtual void scale(float* x, size_t n, float factor) = 0;
  // sums[p] = x[p n] + x[p n + 1] + ... + x[p n + n - 1] in double, in that
  // order, for each of `parts` consecutive runs of n floats (a loss's rows
  // and its hits), returned to the host together: one wait.
  virtual void sums_in_order(const float* x, size_t n, size_t parts, double* sums) = 0;
  double sum_in_order(const float* x, size_t n) {
    double sum = 0;
    sums_in_order(x, n, 1, &sum);
    return sum;
  }

  // Matrix products, row-major (gemm.hpp, gemm_bf16.hpp): C = alpha op(A)
  // op(B) [+ bias] + beta C, and the bf16 forms with fp32 sums.
  virtual void gemm(Trans ta, Trans tb, int M, int N, int K, float alpha, const float* A, int lda, const float* B,
                    int ldb, float beta, float* C, int ldc) = 0;
  virtual void gemm_bf16(Trans ta, Trans tb, int M, int N, int K, float alpha, const Bf16* A, int lda, const Bf16* B,
                         int ldb, float beta, float* C, int ldc, const float* bias = nullptr) = 0;
  virtual void gemm_bf16_rounded(Trans ta, Trans tb, int M, int N, int K, const Bf16* A, int lda, const Bf16* B,
                                 int ldb, Bf16* C, int ldc, const float* bias = nullptr) = 0;
  // Two independent pieces of work of about the same size (a linear layer's
  // weight and input gradients): the CPU runs them side by side where that
  // measured faster, a GPU one after the other on its stream. `after_first`
  // (announcing first's results) runs on the calling thread as soon as the
  // schedule allows: between the two, or after both when side by side.
  virtual void run_pair(FunctionRef<void()> first, FunctionRef<void()> after_first, FunctionRef<void()> second) = 0;

  // Rows, biases, copies (elementwise.hpp, bf16.hpp).
  virtual void fill_rows(float* out, const float* bias, const float* residual, int64_t M, int64_t N) = 0;
  virtual void add_rows(float* out, const float* bias, const float* residual, int64_t M, int64_t N) = 0;
  virtual void bias_backward(float* dbias, const float* dout, int64_t M, int64_t N) = 0;
  virtual void bias_backward_rounded(float* dbias, Bf16* dout16, const float* dout, int64_t M, int64_t N) = 0;
  virtual void gelu_forward_bf16(Bf16* out16, const Bf16* inp16, int64_t n) = 0;
  virtual void gelu_backward_rounded(Bf16* dinp16, float* dbias, const Bf16* inp, const Bf16* dout, int64_t M,
                                     int64_t N) = 0;
  virtual void to_bf16(const float* src, Bf16* dst, size_t n) = 0;
  // dst = float(src) / divisor: a bf16 sum off the wire, averaged in fp32.
  virtual void widen_divided(const Bf16* src, float* dst, size_t n, float divisor) = 0;
  virtual void copy(float* dst, const float* src, size_t n) = 0;
  virtual void fill(float* dst, size_t n, float value) = 0;

  // Attention on the fused qkv (B, T, 3C) (attention.hpp): out (B, T, C)
  // written (under bf16 products bf16->out, rounded) and `saved` filled.
  // bf16: the rounded operands (its `att` is the backend's to set).
  virtual void attention_forward(float* out, AttentionSaved& saved, const float* qkv, int64_t B, int64_t T, int64_t C,
                                 int64_t NH, bool causal, const AttentionBf16* bf16 = nullptr) = 0;
  // Makes `saved` whole again after a recomputation pool's other layers
  // wrote over it (selective recomputation): the CPU computes the
  // probabilities again from q, k, v; a flash kernel has nothing to redo.
  virtual void attention_recompute(AttentionSaved& saved, const float* qkv, int64_t B, int64_t T, int64_t C, int64_t NH,
                                   bool causal, const AttentionBf16* bf16 = nullptr) = 0;
  // dqkv (B, T, 3C) written from dout (B, T, C) (bf16: bf16->dout) and
  // forward's output `out` (bf16: bf16->out), which a flash backward reads.
  // scratch: attention_backward_scratch() floats.
  virtual void attention_backward(float* dqkv, const float* dout, const float* out, AttentionSaved& saved,
                                  const float* qkv, int64_t B, int64_t T, int64_t C, int64_t NH, bool causal,
                                  float* scratch, const AttentionBf16* bf16 = nullptr) = 0;
  virtual size_t attention_backward_scratch(const AttentionSaved& saved, int64_t B, int64_t T, int64_t NH,
                                            bool bf16) = 0;

  // Softmax cross-entropy (cross_entropy.hpp), whole rows or a vocabulary
  // shard. The forward writes lse, loss and hit (N): 1 where the row's
  // argmax is its target, else 0, left on the device for sums_in_order.
  virtual void softmax_xent_forward(float* lse, float* loss, float* hit, const float* logits, const int32_t* targets,
                                    int64_t N, int64_t V) = 0;
  virtual void softmax_xent_backward(float* dlogits, const float* logits, const float* lse, const int32_t* targets,
                                     int64_t N, int64_t V, float dloss, int64_t v0 = 0) = 0;
  virtual void row_max_argmax(float* mx, int32_t* arg, const float* logits, int64_t N, int64_t V) = 0;
  virtual void softmax_xent_shard_sums(float* sumexp, float* target_logit, const float* logits, const float* mx,
                                       const int32_t* targets, int64_t N, int64_t V, int64_t v0) = 0;
  // The vocabulary-parallel loss's rows between its all-reduces
  // (cross_entropy.hpp, vocab_shard_math.hpp): each row's argmax candidate
  // once the row max is known, then lse, loss and hit once the sums are.
  virtual void shard_argmax_candidates(int32_t* arg, const float* local_max, const float* mx, int64_t N, int64_t v0,
                                       int64_t V) = 0;
  virtual void shard_loss_rows(float* lse, float* loss, float* hit, const float* mx, const float* sumexp,
                               const float* target_logit, const int32_t* arg, const int32_t* targets, int64_t N) = 0;

  // Embedding shards and positions, image patches and pooling (embedding.hpp).
  virtual void embedding_rows_forward(float* out, const int32_t* tokens, const float* wte_rows, int64_t v0,
                                      int64_t V_rows, int64_t N, int64_t C) = 0;
  virtual void embedding_rows_backward(float* dwte_rows, const float* dout, const int32_t* tokens, int64_t v0,
                                       int64_t V_rows, int64_t N, int64_t C) = 0;
  virtual void position_add_forward(float* x, const float* pos, int64_t B, int64_t T, int64_t C) = 0;
  virtual void position_add_rows_forward(float* x, const float* pos, int64_t row0, int64_t rows, int64_t T,
                                         int64_t C) = 0;
  virtual void position_add_backward(float* dpos, const float* dout, int64_t B, int64_t T, int64_t C) = 0;
  virtual void patchify(float* patches, const float* pixels, int64_t B, int64_t ch, int64_t H, int64_t W,
                        int64_t P) = 0;
  virtual void meanpool_forward(float* out, const float* inp, int64_t B, int64_t T, int64_t C) = 0;
  virtual void meanpool_backward(float* dinp, const float* dout, int64_t B, int64_t T, int64_t C) = 0;

  // A mixture-of-experts layer's routed rows (routed_rows.hpp): gathers into
  // travel order, the gated combine back into token order, its backward.
  virtual void gather_rows(float* dst, const float* src, const int32_t* rows, int64_t n, int64_t C) = 0;
  virtual void combine_rows(float* out, const float* base, const float* src, const int32_t* offsets,
                            const int32_t* rows, const float* scales, int64_t N, int64_t C) = 0;
  virtual void gate_backward_rows(float* dy, float* dgates, const float* dout, const float* y, const int32_t* tokens,
                                  const float* gates, int64_t n, int64_t C) = 0;
};

// The backend of `device`: the CPU's, or the GPU's in a CUDA build (made on
// first use, on that GPU); a DeviceError says why there is none.
Backend& backend_for(const Device& device);

// The CPU backend (today's kernels).
Backend& cpu_backend();
// GPU `index`'s backend (cuda/cuda_backend.cpp), made current on first use;
// a build without CUDA throws DeviceError saying so.
Backend& cuda_backend(int index);

}  // namespace meshtrain::kernels
