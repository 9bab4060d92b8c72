#pragma once
// Builds the model a job config names, with uninitialized parameters.
#include <memory>

#include "meshtrain/nn/model.hpp"
#include "meshtrain/train/job_config.hpp"

namespace meshtrain {

std::unique_ptr<Model> make_model(const ModelSection& model);

}  // namespace meshtrain
