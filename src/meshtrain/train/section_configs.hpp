#pragma once
// The lower layers' config structs, filled from a job config's sections.
#include "meshtrain/data/data_config.hpp"
#include "meshtrain/optim/config.hpp"
#include "meshtrain/train/job_config.hpp"

namespace meshtrain {

inline DataConfig to_data_config(const DataSection& d) {
  return DataConfig{.kind = d.kind, .path = d.path, .val_fraction = d.val_fraction, .seed = static_cast<uint64_t>(d.seed)};
}

inline OptimizerConfig to_optimizer_config(const OptimizerSection& o) {
  OptimizerConfig c;
  c.name = o.name;
  c.lr = o.lr;
  c.weight_decay = o.weight_decay;
  c.beta1 = o.beta1;
  c.beta2 = o.beta2;
  c.eps = o.eps;
  c.momentum = o.momentum;
  c.nesterov = o.nesterov;
  c.trust_coefficient = o.trust_coefficient;
  return c;
}

// T for token data, 0 for images: what DataLoader::from_config takes.
inline int64_t data_seq_len(const JobConfig& c) { return c.data.kind == "text" ? c.model.block_size : 0; }

}  // namespace meshtrain
