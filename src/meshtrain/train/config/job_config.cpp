#include "meshtrain/train/config/job_config.hpp"

namespace meshtrain {

std::string JobConfig::checkpoint_dir() const {
  return checkpoint.dir.empty() ? training.out_dir + "/checkpoints" : checkpoint.dir;
}

std::string JobConfig::metrics_path() const {
  return metrics.path.empty() ? training.out_dir + "/metrics.jsonl" : metrics.path;
}

std::string JobConfig::tensorboard_dir() const { return training.out_dir + "/tb"; }

}  // namespace meshtrain
