#pragma once
// A multilayer perceptron for image classification (Fashion-MNIST):
//   x (B, input_dim) -> [Linear, GELU] per hidden size -> Linear (classes) -> softmax CE.
// Parameter names: "fc.{i}.weight" (in, out), "fc.{i}.bias", "head.weight", "head.bias".
// Weight decay on the weights, off for biases.
#include <cstdint>
#include <memory>
#include <vector>

#include "meshtrain/core/device_array.hpp"
#include "meshtrain/nn/backend.hpp"
#include "meshtrain/nn/cross_entropy.hpp"
#include "meshtrain/nn/linear.hpp"
#include "meshtrain/nn/model.hpp"

namespace meshtrain {

struct MlpConfig {
  int64_t input_dim = 784;  // H * W
  std::vector<int64_t> hidden = {256, 256};
  int64_t classes = 10;
  Device device{};  // training.device, as GptConfig's
};

class MlpClassifier final : public Model {
 public:
  // Declares and allocates every parameter (zeroed); call init_parameters() next.
  explicit MlpClassifier(const MlpConfig& config);
  MlpClassifier(const MlpClassifier&) = delete;
  MlpClassifier& operator=(const MlpClassifier&) = delete;

  std::string kind() const override { return "mlp"; }
  // Weights ~ N(0, 1 / sqrt(fan_in)) (keeps activations at unit scale), biases 0.
  void draw_parameters(Rng& rng) override;
  // Reads batch.pixels (B, input_dim) and batch.targets (B).
  ForwardResult forward(const Batch& batch) override;
  void backward() override;
  // Per image: 6 * sum of in * out over the Linear layers.
  double flops_per_sample() const override;

  const MlpConfig& config() const { return config_; }

 private:
  MlpConfig config_;
  std::vector<std::unique_ptr<nn::Linear>> fc_;  // hidden layers
  nn::Linear head_;
  nn::SoftmaxCrossEntropy xent_;
  DeviceArray<float> pixels_{nn::memory_of(store_), MemoryKind::Activations};  // the batch's, off the CPU
  std::vector<DeviceArray<float>> act_;  // (B, hidden[i]) GELU outputs
  DeviceArray<float> dbuf_[2] = {DeviceArray<float>(nn::memory_of(store_), MemoryKind::Activations),
                                 DeviceArray<float>(nn::memory_of(store_), MemoryKind::Activations)};  // ping-pong gradients
  int64_t B_ = 0;
  bool ready_ = false;  // a forward() is waiting for its backward()
};

}  // namespace meshtrain
