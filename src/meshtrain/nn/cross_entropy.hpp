#pragma once
// Softmax cross-entropy with integer targets, mean over rows.
#include <cstdint>

#include "meshtrain/core/device_array.hpp"
#include "meshtrain/kernels/backend.hpp"
#include "meshtrain/nn/backend.hpp"
#include "meshtrain/nn/model.hpp"

namespace meshtrain::nn {

// Throws Error naming `who` when a target is outside [0, V) (host memory).
void check_targets(const char* who, const int32_t* targets, int64_t N, int64_t V);

// The mean loss and the hits of N rows from loss_hits (2N, the backend's
// memory: each row's loss, then its hit), summed in row order in double on
// the host: the same loss whatever the thread count, and the forward's one
// wait for the device.
ForwardResult mean_loss_and_hits(kernels::Backend& backend, const float* loss_hits, int64_t N);

class SoftmaxCrossEntropy {
 public:
  // Runs on `backend` (its model's store's: nn/backend.hpp).
  explicit SoftmaxCrossEntropy(kernels::Backend& backend) : backend_(backend) {}

  // Mean loss over N rows of V logits, and how many argmaxes hit the target.
  // Throws if a target is outside [0, V). Remembers logits and targets.
  // targets: host memory (uploaded where the backend is not the CPU).
  ForwardResult forward(const float* logits, const int32_t* targets, int64_t N, int64_t V);

  // dlogits (N, V) = d(mean loss) / d logits, written; may alias the logits
  // (the models reuse their logits buffer in place).
  void backward(float* dlogits);

  // The fused classifier (nn/gpt.hpp): the loss and its gradient a block of
  // rows at a time, so the (N, V) fp32 logits never exist whole. begin()
  // checks and stages the N targets; rows() takes the logits of rows
  // [r0, r0 + rows) and leaves in their place their gradient of the mean
  // loss over all N rows; finish() gives the mean loss and the hits over
  // all N. backward() is not called after.
  void begin(const int32_t* targets, int64_t N, int64_t V);
  void rows(float* logits, int64_t r0, int64_t rows);
  // The loss's rows and hits summed on the host: the forward's one wait for
  // the device.
  ForwardResult finish() const;

 private:
  kernels::Backend& backend_;
  const float* logits_ = nullptr;
  const int32_t* targets_ = nullptr;  // borrowed (on the CPU) or targets_staged_'s
  int64_t N_ = 0, V_ = 0;
  DeviceArray<float> lse_{backend_.allocator(), MemoryKind::Activations};   // (N)
  // (2N): each row's loss, then its hit (1 or 0), summed together by finish().
  DeviceArray<float> loss_{backend_.allocator(), MemoryKind::Activations};
  DeviceArray<int32_t> targets_staged_{backend_.allocator(), MemoryKind::Activations};
};

}  // namespace meshtrain::nn
