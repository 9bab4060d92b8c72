#include "meshtrain/train/engine/model_factory.hpp"

#include "meshtrain/core/error.hpp"
#include "meshtrain/nn/gpt.hpp"
#include "meshtrain/nn/mlp_classifier.hpp"
#include "meshtrain/nn/vit.hpp"
#include "meshtrain/parallel/pipeline/stage_split.hpp"

namespace meshtrain {

nn::MoeConfig gpt_moe_config(const ModelSection& m) {
  return {.n_expert = m.n_expert,
          .top_k = m.top_k,
          .moe_every = m.moe_every,
          .capacity_factor = m.capacity_factor,
          .aux_loss_coef = m.aux_loss_coef,
          .z_loss_coef = m.z_loss_coef,
          .expert_bias_rate = m.expert_bias_rate};
}

kernels::AttentionKernel attention_kernel(const ModelSection& m, const TrainingSection& training) {
  switch (m.kind) {
    case ModelKind::Gpt: return kernels::resolve_attention(training.attention, m.block_size);
    case ModelKind::Vit: {
      const int64_t side = m.patch_size > 0 ? m.image_size / m.patch_size : 0;
      return kernels::resolve_attention(training.attention, side * side);
    }
    case ModelKind::Mlp: break;
  }
  return kernels::AttentionKernel::Auto;
}

std::unique_ptr<Model> make_model(const ModelSection& m, nn::TensorParallelComm* tp) {
  return make_model(m, ModelLayout{.tp = tp});
}

ModelLayout model_layout(const ParallelSection& p, nn::TensorParallelComm* tp, int stage, nn::ExpertParallelComm* ep,
                         const TrainingSection* training, const Device& device) {
  ModelLayout layout{.tp = tp,
                     .ep = ep,
                     .pipeline = static_cast<int>(p.pipeline),
                     .virtual_stages = static_cast<int>(p.virtual_stages),
                     .stage = stage,
                     .stage_layers = p.stage_layers,
                     .device = device};
  if (training) {
    layout.recompute = training->recompute;
    layout.precision = training->precision;
    layout.attention = training->attention;
  }
  return layout;
}

namespace {

// The model of `m`, its layers split as `layout` says.
std::unique_ptr<Model> make_layer_model(const ModelSection& m, const ModelLayout& layout) {
  nn::TensorParallelComm* tp = layout.tp;
  const int P = layout.pipeline, V = layout.virtual_stages;
  if (P * V > 1 && m.kind != ModelKind::Gpt)
    throw ConfigError("parallel.pipeline: pipeline stages split a GPT, not model.kind '" + enum_string(m.kind) + "'");
  switch (m.kind) {
    case ModelKind::Gpt: {
      const GptConfig config{.n_layer = m.n_layer,
                             .n_embd = m.n_embd,
                             .n_head = m.n_head,
                             .block_size = m.block_size,
                             .vocab_size = m.vocab_size,
                             .moe = gpt_moe_config(m),
                             .recompute = layout.recompute,
                             .precision = layout.precision,
                             .attention = layout.attention,
                             .device = layout.device};
      if (P * V == 1)
        return std::make_unique<Gpt>(
            config, tp, std::vector<GptPiece>{{.first_layer = 0, .end_layer = m.n_layer, .embedding = true, .head = true}},
            layout.ep);
      const std::vector<int64_t> counts = parallel::pipeline::stage_layer_counts(m.n_layer, P * V, layout.stage_layers);
      return std::make_unique<Gpt>(config, tp, parallel::pipeline::rank_pieces(counts, P, V, layout.stage), layout.ep);
    }
    case ModelKind::Mlp:
      if (tp && tp->size() > 1) throw ConfigError("model.kind 'mlp' has no tensor-parallel form (use gpt or vit)");
      return std::make_unique<MlpClassifier>(
          MlpConfig{.input_dim = m.image_size * m.image_size,
                    .hidden = m.hidden,
                    .classes = m.classes,
                    .device = layout.device});
    case ModelKind::Vit:
      return std::make_unique<Vit>(VitConfig{.image_size = m.image_size,
                                             .patch_size = m.patch_size,
                                             .channels = 1,
                                             .n_layer = m.n_layer,
                                             .n_embd = m.n_embd,
                                             .n_head = m.n_head,
                                             .classes = m.classes,
                                             .recompute = layout.recompute,
                                             .precision = layout.precision,
                                             .attention = layout.attention,
                                             .device = layout.device},
                                   tp);
  }
  throw ConfigError("model.kind: unknown model '" + enum_string(m.kind) + "' (expected " +
                    enum_choices<ModelKind>() + ")");
}

}  // namespace

std::unique_ptr<Model> make_model(const ModelSection& m, const ModelLayout& layout) {
  std::unique_ptr<Model> model = make_layer_model(m, layout);
  model->store().set_compute_precision(layout.precision);
  return model;
}

}  // namespace meshtrain
