#pragma once
// Vision Transformer for small images (Fashion-MNIST):
//   pixels (B, ch, H, W) -> patches (B, NP, ch*P*P) -> patch_embed Linear + pos_embed (B, NP, C)
//   -> n_layer non-causal pre-LN blocks (the GPT Block class) -> ln_f -> mean over patches (B, C)
//   -> head Linear (B, classes) -> softmax CE.
// Mean pooling instead of a class token: same accuracy at this scale, one
// fewer special case in attention and position embedding.
//
// Dims: B batch, NP = (image_size / patch_size)^2 patches, C n_embd, L n_layer.
// Names: "patch_embed.weight" (ch*P*P, C), "patch_embed.bias", "pos_embed" (NP, C),
// "h.{i}.*" as in GPT, "ln_f.*", "head.weight" (C, classes), "head.bias".
// Weight decay on Linear weights, off for biases, norms and pos_embed (timm's rule).
#include <cstdint>
#include <memory>
#include <vector>

#include "meshtrain/core/device_array.hpp"
#include "meshtrain/nn/backend.hpp"
#include "meshtrain/core/precision.hpp"
#include "meshtrain/nn/block.hpp"
#include "meshtrain/nn/cross_entropy.hpp"
#include "meshtrain/nn/layernorm.hpp"
#include "meshtrain/nn/linear.hpp"
#include "meshtrain/nn/model.hpp"
#include "meshtrain/nn/workspace.hpp"

namespace meshtrain {

struct VitConfig {
  int64_t image_size = 28;  // H = W
  int64_t patch_size = 7;   // P; must divide image_size
  int64_t channels = 1;
  int64_t n_layer = 4;
  int64_t n_embd = 64;
  int64_t n_head = 4;
  int64_t classes = 10;
  nn::Recompute recompute = nn::Recompute::None;  // nn/recompute.hpp
  // The products' precision, set on the store; bf16 also keeps the blocks'
  // activations in bf16 (nn/recompute.hpp).
  Precision precision = Precision::Fp32;
  kernels::AttentionKernel attention = kernels::AttentionKernel::Auto;  // training.attention
  Device device{};  // training.device, as GptConfig's
};

class Vit final : public Model {
 public:
  // Declares and allocates every parameter (zeroed); call init_parameters() next.
  // With a tensor-parallel group the blocks are split over its ranks
  // (block.hpp); the patch embedding, ln_f and the head stay whole on every
  // rank, so the loss is the same on each. A group running sequence
  // parallelism is a ConfigError: it is built for gpt only.
  explicit Vit(const VitConfig& config, nn::TensorParallelComm* tp = nullptr);
  Vit(const Vit&) = delete;
  Vit& operator=(const Vit&) = delete;

  std::string kind() const override { return "vit"; }
  // Linear weights and pos_embed ~ N(0, 0.02), c_proj weights ~ N(0, 0.02 / sqrt(2 L)),
  // biases 0, layernorms 1 / 0.
  void draw_parameters(Rng& rng) override;
  // Reads batch.pixels (B, ch * H * W), planar per channel, and batch.targets (B).
  ForwardResult forward(const Batch& batch) override;
  void backward() override;
  // Per image: NP * (6 * (ch P^2 C + 12 L C^2) + 12 L C NP) + 6 C classes
  // (matmul weights 6N per patch, attention 12 L C NP per patch, the head once).
  double flops_per_sample() const override;

  const VitConfig& config() const { return config_; }
  int64_t num_patches() const { return np_; }

 private:
  VitConfig config_;
  int64_t np_, patch_dim_;
  nn::Linear patch_embed_;
  size_t pos_;
  nn::SharedActivations recomputed_{nn::memory_of(store_)};  // before the blocks, which share it
  std::vector<std::unique_ptr<nn::Block>> blocks_;
  nn::LayerNorm ln_f_;
  nn::Linear head_;
  nn::SoftmaxCrossEntropy xent_;
  nn::Workspace ws_{nn::memory_of(store_)};
  int64_t B_ = 0;
  bool ready_ = false;
  DeviceArray<float> pixels_{nn::memory_of(store_), MemoryKind::Activations};   // the batch's, off the CPU
  DeviceArray<float> patches_{nn::memory_of(store_), MemoryKind::Activations};  // (B, NP, ch*P*P)
  DeviceArray<float> pooled_{nn::memory_of(store_), MemoryKind::Activations};   // (B, C)
  DeviceArray<float> dpooled_{nn::memory_of(store_), MemoryKind::Activations};  // (B, C)
  DeviceArray<float> dres_{nn::memory_of(store_), MemoryKind::Activations};     // (B, NP, C)
};

}  // namespace meshtrain
