// The CPU backend: every call is the CPU kernel of the same name, so a model
// run through it computes exactly what it computed calling the kernels
// directly. Its memory is the host's, 64-byte aligned.
#include <cstdlib>
#include <cstring>
#include <new>

#include "meshtrain/core/huge_pages.hpp"
#include "meshtrain/kernels/adamw.hpp"
#include "meshtrain/kernels/backend.hpp"
#include "meshtrain/kernels/elementwise.hpp"
#include "meshtrain/kernels/embedding.hpp"
#include "meshtrain/kernels/layernorm.hpp"

namespace meshtrain::kernels {
namespace {

class HostMemory final : public DeviceAllocator {
 public:
  void* allocate(size_t bytes) override {
    void* p = allocate_aligned(bytes);
    if (!p) throw std::bad_alloc();
    return p;
  }
  void release(void* p) noexcept override { std::free(p); }
  void zero(void* p, size_t bytes) override { std::memset(p, 0, bytes); }
  void upload(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void download(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  std::string name() const override { return "cpu"; }
};

class CpuBackend final : public Backend {
 public:
  Device device() const override { return {}; }
  DeviceAllocator& allocator() override { return memory_; }

  void encoder_forward(float* out, const int32_t* tokens, const float* wte, const float* wpe, int64_t B, int64_t T,
                       int64_t C) override {
    kernels::encoder_forward(out, tokens, wte, wpe, B, T, C);
  }
  void encoder_backward(float* dwte, float* dwpe, const float* dout, const int32_t* tokens, int64_t B, int64_t T,
                        int64_t C) override {
    kernels::encoder_backward(dwte, dwpe, dout, tokens, B, T, C);
  }
  void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                         const float* bias, int64_t N, int64_t C) override {
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

 private:
  HostMemory memory_;
};

}  // namespace

Backend& cpu_backend() {
  static CpuBackend backend;
  return backend;
}

Backend& backend_for(const Device& device) {
  if (device.is_cpu()) return cpu_backend();
  return cuda_backend(device.index);
}

}  // namespace meshtrain::kernels
