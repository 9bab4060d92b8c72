#pragma once
// Builds the optimizer a config names, after checking every field it reads.
#include <memory>
#include <span>

#include "meshtrain/core/param_store.hpp"
#include "meshtrain/optim/config.hpp"
#include "meshtrain/optim/optimizer.hpp"

namespace meshtrain {

// Throws ConfigError naming the key, e.g.
// "optimizer.beta1: must be in [0, 1), got 1".
void validate_optimizer_config(const OptimizerConfig& config);

// Validates config, then builds the optimizer for all of the store, or for
// the ZeRO shard `segments` when given, with zeroed state buffers of
// local_size() elements. The store need not be allocated yet, but its views
// must all be declared.
std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& config, const ParamStore& store);
std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& config, const ParamStore& store,
                                          std::span<const FlatSegment> segments);

}  // namespace meshtrain
