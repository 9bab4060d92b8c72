#pragma once
// Builds the model a job config names, with uninitialized parameters. With a
// tensor-parallel group, this rank's part of it (gpt.hpp, vit.hpp).
#include <memory>

#include "meshtrain/nn/model.hpp"
#include "meshtrain/nn/tensor_parallel.hpp"
#include "meshtrain/train/config/job_config.hpp"

namespace meshtrain {

std::unique_ptr<Model> make_model(const ModelSection& model, nn::TensorParallelComm* tp = nullptr);

}  // namespace meshtrain
