#include "meshtrain/kernels/cuda/cuda_backend.hpp"

#include <cuda_runtime_api.h>

#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "meshtrain/kernels/cuda/adamw.hpp"
#include "meshtrain/kernels/cuda/cuda_check.hpp"
#include "meshtrain/kernels/cuda/cuda_memory.hpp"
#include "meshtrain/kernels/cuda/encoder.hpp"
#include "meshtrain/kernels/cuda/gelu.hpp"
#include "meshtrain/kernels/cuda/layernorm.hpp"
#include "meshtrain/kernels/cuda/residual.hpp"
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

 private:
  // `buffer` grown to at least `bytes` (device memory, uninitialised).
  void* scratch(DeviceBuffer<std::byte>& buffer, size_t bytes) {
    if (buffer.size() < bytes) buffer = DeviceBuffer<std::byte>(memory_, bytes, MemoryKind::Other);
    return buffer.ptr().raw();
  }

  int index_;
  cudaStream_t stream_;
  CudaAllocator memory_;
  DeviceBuffer<std::byte> encoder_scratch_, layernorm_scratch_;
  // The AdamW chunk table as the kernel reads it, uploaded again only when
  // the chunks' pointers change (ZeRO rebinding), not every step: the
  // upload waits for the device.
  std::vector<cuda::AdamWChunk> table_;
  DeviceBuffer<cuda::AdamWChunk> table_on_device_;
  int64_t max_chunk_ = 0;
};

bool same_table(const std::vector<cuda::AdamWChunk>& a, const std::vector<cuda::AdamWChunk>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].param != b[i].param || a[i].grad != b[i].grad || a[i].m != b[i].m || a[i].v != b[i].v ||
        a[i].size != b[i].size || a[i].weight_decay != b[i].weight_decay)
      return false;
  return true;
}

void CudaBackend::adamw_update(std::span<const kernels::AdamWChunk> chunks, const AdamWStep& step) {
  std::vector<cuda::AdamWChunk> table;
  table.reserve(chunks.size());
  int64_t max_chunk = 0;
  for (const kernels::AdamWChunk& c : chunks) {
    table.push_back({c.param, c.grad, c.m, c.v, int64_t(c.size), c.weight_decay ? 1 : 0});
    max_chunk = std::max(max_chunk, int64_t(c.size));
  }
  if (!same_table(table, table_)) {
    table_on_device_ = DeviceBuffer<cuda::AdamWChunk>(memory_, table.size(), MemoryKind::OptimizerState);
    table_on_device_.upload(table);
    table_ = std::move(table);
    max_chunk_ = max_chunk;
  }
  if (table_.empty()) return;
  cuda::adamw_update(table_on_device_.ptr().raw(), int64_t(table_.size()), max_chunk_, step, nullptr, stream_);
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
