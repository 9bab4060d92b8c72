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
// value to the host (sum_squares) wait for the device.
//
// The families here are those whose CUDA twins exist; the linear layers'
// products and attention follow (docs/gpu.md says what is left).
#include <cstddef>
#include <cstdint>
#include <span>

#include "meshtrain/core/bf16.hpp"
#include "meshtrain/core/device.hpp"
#include "meshtrain/core/device_buffer.hpp"
#include "meshtrain/kernels/adamw_math.hpp"

namespace meshtrain::kernels {

// One run of an AdamW update: parameters, gradients and both moments,
// `size` elements each (optim/chunks.hpp cuts them).
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

  // Token and position embedding (embedding.hpp): out (B, T, C); the
  // backward adds into dwte (V, C) and dwpe (T, C).
  virtual void encoder_forward(float* out, const int32_t* tokens, const float* wte, const float* wpe, int64_t B,
                               int64_t T, int64_t C) = 0;
  virtual void encoder_backward(float* dwte, float* dwpe, const float* dout, const int32_t* tokens, int64_t B,
                                int64_t T, int64_t C) = 0;

  // Layer normalization (layernorm.hpp).
  virtual void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                                 const float* bias, int64_t N, int64_t C) = 0;
  virtual void layernorm_forward_rounded(Bf16* out16, float* mean, float* rstd, const float* inp,
                                         const float* weight, const float* bias, int64_t N, int64_t C) = 0;
  virtual void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                                  const float* weight, const float* mean, const float* rstd, const float* dresid,
                                  int64_t N, int64_t C) = 0;

  // Element-wise (elementwise.hpp): out = a + b; GELU and its gradient.
  virtual void residual_forward(float* out, const float* a, const float* b, int64_t n) = 0;
  virtual void gelu_forward(float* out, const float* inp, int64_t n) = 0;
  virtual void gelu_backward(float* dinp, const float* inp, const float* dout, int64_t n) = 0;

  // AdamW over every chunk (adamw_math.hpp's element step).
  virtual void adamw_update(std::span<const AdamWChunk> chunks, const AdamWStep& step) = 0;
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
