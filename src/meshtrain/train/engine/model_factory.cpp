#include "meshtrain/train/engine/model_factory.hpp"

#include "meshtrain/core/error.hpp"
#include "meshtrain/nn/gpt.hpp"
#include "meshtrain/nn/mlp_classifier.hpp"
#include "meshtrain/nn/vit.hpp"

namespace meshtrain {

std::unique_ptr<Model> make_model(const ModelSection& m, nn::TensorParallelComm* tp) {
  switch (m.kind) {
    case ModelKind::Gpt:
      return std::make_unique<Gpt>(GptConfig{.n_layer = m.n_layer,
                                             .n_embd = m.n_embd,
                                             .n_head = m.n_head,
                                             .block_size = m.block_size,
                                             .vocab_size = m.vocab_size},
                                   tp);
    case ModelKind::Mlp:
      if (tp && tp->size() > 1) throw ConfigError("model.kind 'mlp' has no tensor-parallel form (use gpt or vit)");
      return std::make_unique<MlpClassifier>(
          MlpConfig{.input_dim = m.image_size * m.image_size, .hidden = m.hidden, .classes = m.classes});
    case ModelKind::Vit:
      return std::make_unique<Vit>(VitConfig{.image_size = m.image_size,
                                             .patch_size = m.patch_size,
                                             .channels = 1,
                                             .n_layer = m.n_layer,
                                             .n_embd = m.n_embd,
                                             .n_head = m.n_head,
                                             .classes = m.classes},
                                   tp);
  }
  throw ConfigError("model.kind: unknown model '" + enum_string(m.kind) + "' (expected " +
                    enum_choices<ModelKind>() + ")");
}

}  // namespace meshtrain
