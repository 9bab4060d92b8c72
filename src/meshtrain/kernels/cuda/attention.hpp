#pragma once
// Flash-style multi-head self-attention on the GPU, the twin of
// kernels/attention.hpp: the same fused qkv (B, T, 3C) input (head h of q
// is columns [h*hs, (h+1)*hs) of each row, of k the same plus C, of v plus
// 2C), read in place through strides; the same out (B, T, C) layout; the
// same softmax(q k^T / sqrt(hs) [+ causal mask]) v. What forward saves for
// backward differs: the per-row log-sum-exp lse (B, NH, T) of the scaled
// scores instead of the (B, NH, T, T) probabilities, which backward
// recomputes tile by tile (attention.cu explains the tiling).
//
// fp32 accumulation throughout, exp and log by CUDA's expf / logf (not
// fast_exp), so results match the CPU's within rounding, not bit for bit.
// Backward is deterministic (no atomics): the same inputs give the same bits
// every run. Head sizes: multiples of 8 up to 128 (GPT-2: 64); any other
// size, or C not a multiple of NH, throws DeviceError naming it, before any
// device work. T is any value >= 1; B or T of 0 is a no-op. Launched on
// `stream`, asynchronous.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "meshtrain/core/bf16.hpp"

namespace meshtrain::kernels::cuda {

// out (B, T, C) and lse (B, NH, T) written, from qkv (B, T, 3C).
// lse[b, h, t] = log(sum_j exp(s_tj)), s_tj = q_t . k_j / sqrt(hs) over the
// keys j row t sees (j <= t when causal).
void attention_forward(float* out, float* lse, const float* qkv, int64_t B, int64_t T, int64_t C, int64_t NH,
                       bool causal, cudaStream_t stream);
// bf16 qkv, fp32 arithmetic; out fp32, or rounded to bf16 (nearest even).
void attention_forward(float* out, float* lse, const Bf16* qkv, int64_t B, int64_t T, int64_t C, int64_t NH,
                       bool causal, cudaStream_t stream);
void attention_forward(Bf16* out, float* lse, const Bf16* qkv, int64_t B, int64_t T, int64_t C, int64_t NH,
                       bool causal, cudaStream_t stream);

// Floats of device scratch attention_backward needs: delta (B, NH, T).
int64_t attention_backward_scratch_floats(int64_t B, int64_t T, int64_t NH);

// dqkv (B, T, 3C) written (fp32), from dout (B, T, C) and what forward read
// and wrote: out (B, T, C), lse (B, NH, T), qkv (B, T, 3C). delta is scratch
// (attention_backward_scratch_floats), overwritten: delta[b, h, t] =
// dout_t . out_t over the head's columns. dqkv must not alias an input.
void attention_backward(float* dqkv, float* delta, const float* dout, const float* out, const float* lse,
                        const float* qkv, int64_t B, int64_t T, int64_t C, int64_t NH, bool causal,
                        cudaStream_t stream);
// bf16 qkv and dout, with the out the matching forward wrote (fp32 or bf16).
void attention_backward(float* dqkv, float* delta, const Bf16* dout, const float* out, const float* lse,
                        const Bf16* qkv, int64_t B, int64_t T, int64_t C, int64_t NH, bool causal,
                        cudaStream_t stream);
void attention_backward(float* dqkv, float* delta, const Bf16* dout, const Bf16* out, const float* lse,
                        const Bf16* qkv, int64_t B, int64_t T, int64_t C, int64_t NH, bool causal,
                        cudaStream_t stream);

// Whether these kernels take head size hs = C / NH (a multiple of 8, 8 to 128).
bool attention_head_size_supported(int64_t hs);

}  // namespace meshtrain::kernels::cuda
