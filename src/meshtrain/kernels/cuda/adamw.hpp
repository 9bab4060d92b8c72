#pragma once
// AdamW on the GPU: kernels::adamw_element (kernels/adamw_math.hpp) per
// element, so every element gets the CPU optimizer's bits (optim/adamw.cpp)
// from the same AdamWStep. Gradient clipping can ride along: grad_scale, a
// device float (global_norm.hpp's clip_coefficient), multiplies each
// gradient first, the bits of scaling the gradients in place beforehand
// (optim/clip.hpp's scale_range, then the update); null means no scaling.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "meshtrain/kernels/adamw_math.hpp"

namespace meshtrain::kernels::cuda {

// One run of elements to update, as optim/chunks.hpp's UpdateChunk resolved
// to device pointers: param, grad, m, v each hold `size` elements. No
// implicit padding, so a table of them compares bytewise (chunk_table.hpp).
struct AdamWChunk {
  float* param;
  const float* grad;
  float* m;  // first moment (exp_avg)
  float* v;  // second moment (exp_avg_sq)
  int64_t size;
  int32_t weight_decay;  // nonzero: the tensor decays (decay_factor), else 1
  int32_t unused = 0;    // the padding, spelled out and zero
};

// Every chunk of chunks (n_chunks, in device memory) in one launch;
// max_chunk_size is the largest size among them (it sizes the grid).
// Chunks must not overlap.
void adamw_update(const AdamWChunk* chunks, int64_t n_chunks, int64_t max_chunk_size, const AdamWStep& step,
                  const float* grad_scale, cudaStream_t stream);

// One flat range of n elements: param, grad, m, v (n), four distinct buffers.
void adamw_update(float* param, const float* grad, float* m, float* v, int64_t n, bool weight_decay,
                  const AdamWStep& step, const float* grad_scale, cudaStream_t stream);

}  // namespace meshtrain::kernels::cuda
