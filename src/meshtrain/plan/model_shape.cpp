#include "meshtrain/plan/model_shape.hpp"

#include <algorithm>

#include "meshtrain/core/error.hpp"

namespace meshtrain::plan {
namespace {

void require_positive(double value, const char* key) {
  if (!(value > 0)) throw ConfigError(std::string(key) + ": must be positive (got " + std::to_string(value) + ")");
}

}  // namespace

void ModelShape::validate() const {
  if (kind == ShapeKind::Params) {
    require_positive(params, "model.params");
    require_positive(tokens_per_sample, "model.tokens_per_sample");
    if (activation_bytes_per_sample < 0) throw ConfigError("model.activation_mb_per_sample: must not be negative");
    return;
  }
  require_positive(double(layers), "model.layers");
  require_positive(double(hidden), "model.hidden");
  require_positive(double(heads), "model.heads");
  if (hidden % heads != 0)
    throw ConfigError("model.heads: " + std::to_string(heads) + " heads do not divide the hidden size " +
                      std::to_string(hidden));
  if (kind == ShapeKind::Gpt) {
    require_positive(double(seq_len), "model.seq_len");
    require_positive(double(vocab), "model.vocab");
  } else {
    require_positive(double(image_size), "model.image_size");
    require_positive(double(patch_size), "model.patch_size");
    require_positive(double(channels), "model.channels");
    require_positive(double(classes), "model.classes");
    if (image_size % patch_size != 0)
      throw ConfigError("model.patch_size: " + std::to_string(patch_size) + " does not divide the image size " +
                        std::to_string(image_size));
  }
  require_positive(double(experts), "model.experts");
  if (top_k < 1 || top_k > experts)
    throw ConfigError("model.top_k: must be between 1 and model.experts (" + std::to_string(experts) + "), got " +
                      std::to_string(top_k));
}

double ModelShape::tokens() const {
  if (kind == ShapeKind::Params) return tokens_per_sample;
  if (kind == ShapeKind::Gpt) return double(seq_len);
  const double side = double(image_size / patch_size);
  return side * side + 1;
}

namespace {

// One MLP: h -> 4h -> h with biases.
double mlp_params(double h) { return 8 * h * h + 5 * h; }

}  // namespace

double ModelShape::parameters() const {
  if (kind == ShapeKind::Params) return params;
  const double h = double(hidden), L = double(layers), s = tokens();
  const double attention = 4 * h * h + 4 * h, norms = 4 * h;
  const double router = is_moe() ? h * double(experts) : 0;
  const double per_layer = attention + norms + double(experts) * mlp_params(h) + router;
  double outside = 2 * h + s * h;  // final norm, position embeddings
  if (kind == ShapeKind::Gpt)
    outside += double(vocab) * h;  // token embedding, tied with the output head
  else
    outside += double(patch_size * patch_size * channels) * h + h  // patch embedding
               + h + h * double(classes) + double(classes);        // class token, head
  return L * per_layer + outside;
}

double ModelShape::expert_parameters() const {
  return is_moe() ? double(layers) * double(experts) * mlp_params(double(hidden)) : 0;
}

double ModelShape::active_parameters() const {
  if (!is_moe()) return parameters();
  return parameters() - expert_parameters() + double(layers) * double(top_k) * mlp_params(double(hidden));
}

double ModelShape::train_flops_per_sample(bool recompute) const {
  const double passes = recompute ? 4 : 3;  // forward, backward = 2 forwards, and the recomputed forward
  double per_token = 2 * active_parameters();
  if (has_shape()) per_token += 4 * double(layers) * double(hidden) * tokens();  // attention scores and mix
  return passes * per_token * tokens();
}

double ModelShape::activation_bytes(double b, int t, bool recompute, double act_bytes) const {
  return activation_bytes(b, t, recompute ? ActivationRecompute::Full : ActivationRecompute::None, act_bytes);
}

double ModelShape::activation_bytes(double b, int t, ActivationRecompute mode, double act_bytes, bool dropout) const {
  if (kind == ShapeKind::Params) return activation_bytes_per_sample * b;
  const double s = tokens();
  return meshtrain::activation_bytes(
      {.seq = s,
       .micro_batch = b,
       .hidden = double(hidden),
       .heads = double(heads),
       .layers = double(layers),
       .head_floats = kind == ShapeKind::Gpt ? s * b * double(vocab) / t : b * double(classes),
       .tensor = double(t),
       .act_bytes = act_bytes,
       .extra_experts = double(top_k - 1),
       .dropout = dropout,
       .flash_attention = flash_attention},
      mode);
}

double ModelShape::layer_output_bytes(double b, double act_bytes) const {
  return has_shape() ? tokens() * b * double(hidden) * act_bytes : 0;
}

}  // namespace meshtrain::plan
