#include "meshtrain/train/loop/init_from.hpp"

#include <filesystem>
#include <memory>
#include <vector>

#include "meshtrain/checkpoint/placement_reader.hpp"
#include "meshtrain/core/error.hpp"
#include "meshtrain/train/engine/model_factory.hpp"
#include "meshtrain/train/interop/hf_gpt2.hpp"
#include "meshtrain/train/loop/train_checkpoint.hpp"

namespace meshtrain {

std::string init_parameters_from(const ModelSection& model_config, Model& model, parallel::ZeroEngine* zero) {
  const std::string& path = model_config.init_from;
  if (!std::filesystem::exists(path)) throw IoError("model.init_from: " + path + " does not exist");
  if (const auto hf = interop::find_hf_gpt2(path)) {
    // The file holds the whole model: its layout is one process's model of
    // the job's sizes, which this rank's part is cut from by name.
    std::vector<checkpoint::SavedTensorRank> saved(1);
    saved[0].layout = checkpoint::layout_copy(make_model(model_config)->store());
    saved[0].reader = interop::open_hf_gpt2(*hf, model_config, *saved[0].layout);
    const auto reader = checkpoint::open_resharded(std::move(saved), model.store());
    read_parameters(*reader, model, zero);
    return "Hugging Face GPT-2 " + hf->weights.string();
  }
  const std::string checkpoint = resolve_checkpoint(path);
  load_train_checkpoint(checkpoint, model, /*optimizer=*/nullptr, zero);
  return "checkpoint " + checkpoint;
}

}  // namespace meshtrain
