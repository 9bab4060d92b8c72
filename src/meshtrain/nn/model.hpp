#pragma once
// What the trainer sees of a model: a ParamStore, a forward that returns the
// mean loss and keeps what backward needs, and a backward that accumulates
// (+=) into the gradient buffer. Strategies only move bytes of the store.
#include <cstdint>
#include <string>

#include "meshtrain/core/batch.hpp"
#include "meshtrain/core/device.hpp"
#include "meshtrain/core/param_store.hpp"
#include "meshtrain/core/rng.hpp"

namespace meshtrain {

struct ForwardResult {
  float loss = 0;       // mean over predictions (tokens or images)
  int64_t correct = 0;  // argmax == target
  int64_t count = 0;    // number of predictions
};

class Model {
 public:
  virtual ~Model() = default;
  virtual std::string kind() const = 0;  // "gpt", "mlp", "vit"
  ParamStore& store() { return store_; }
  const ParamStore& store() const { return store_; }
  // Fills the parameters from rng (deterministically), on any device: the
  // values are drawn on the host (nn/init.hpp) and uploaded.
  void init_parameters(Rng& rng) {
    store_.fill_params_on_host([&] { draw_parameters(rng); });
  }
  // Forward pass with loss; saves activations for backward().
  virtual ForwardResult forward(const Batch& batch) = 0;
  // Backward of the last forward(); grads += dloss/dparam, where loss is the mean loss.
  virtual void backward() = 0;
  // FLOPs of one forward+backward per prediction (6N plus attention), for GFLOP/s.
  virtual double flops_per_sample() const = 0;

 protected:
  Model() = default;
  // A model whose parameters, gradients and activations live on `device`
  // (its backend's memory): set before any layer is built, which the base
  // class's construction guarantees.
  explicit Model(const Device& device);
  // The parameters' values from rng, written through store_.param(i) (host
  // memory while init_parameters runs).
  virtual void draw_parameters(Rng& rng) = 0;

  ParamStore store_;
};

}  // namespace meshtrain
