#include "meshtrain/train/train.hpp"

#include "meshtrain/train/loop/trainer.hpp"
#include "meshtrain/train/loop/training_device.hpp"
#include "meshtrain/train/ps/ps_worker.hpp"

namespace meshtrain {

TrainSummary train(const JobConfig& config, const TrainOptions& options) {
  // First, so a job that asks for a GPU it cannot use stops before anything is built.
  const OpenedDevice opened = open_training_device(config.training);
  check_device_job(opened.device, config);  // and a job it cannot run there, before anything is written
  if (config.parallel.data == DataParallelism::ParameterServer)
    return train_parameter_server_worker(config, options, opened.device);
  return train_synchronous(config, options, opened);
}

}  // namespace meshtrain
