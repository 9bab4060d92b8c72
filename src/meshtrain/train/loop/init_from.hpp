#pragma once
// model.init_from: a run's starting parameters from a trained model instead
// of the seed's random ones (fine-tuning). The source is
//   - a Hugging Face GPT-2 (a save_pretrained directory or a safetensors
//     file: interop/hf_gpt2.hpp), read as the whole model and resharded by
//     name into this rank's layout (tensor, pipeline, ZeRO);
//   - or a meshtrain checkpoint of any layout (a step directory or a
//     directory of them, the newest verified one taken): its parameters only;
//     the optimizer state, the step and the data position start afresh.
// Applied only when a run starts from step 0: a run that resumes from its
// own checkpoint continues from that.
#include <string>

#include "meshtrain/nn/model.hpp"
#include "meshtrain/parallel/zero/zero_engine.hpp"
#include "meshtrain/train/config/job_config.hpp"

namespace meshtrain {

// Reads the parameters `model_config.init_from` names into `model` (built
// from model_config in this rank's layout; with `zero` at stage 3, this
// worker's shard). The model section is all it needs: the source's layout
// is one process's model of the same sizes. Everything is checked before a
// parameter is written; a mismatch is a CheckpointError naming the tensor
// and both shapes. Returns what was loaded, for the log ("Hugging Face
// GPT-2 <path>", "checkpoint <path>").
std::string init_parameters_from(const ModelSection& model_config, Model& model, parallel::ZeroEngine* zero);

}  // namespace meshtrain
