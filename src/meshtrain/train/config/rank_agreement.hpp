#pragma once
// At start-up every worker checks that all workers run the same job: the
// settings that decide which collectives run, in which order and on which
// numbers (the model, batch, steps, optimizer, schedule, evaluation and
// checkpoint cadence, data order, the parallel layout). Ranks that disagree
// would otherwise wait for each other's collectives until the timeout, or
// silently train different numbers. Settings that may differ from host to
// host are left out: paths (data, output, checkpoints, metrics), threads,
// timeouts and the launcher's pool sizes.
#include <string>
#include <utility>
#include <vector>

#include "meshtrain/comm/group/process_group.hpp"
#include "meshtrain/train/config/job_config.hpp"

namespace meshtrain {

// ("section.key", value as TOML) for every setting the workers must share.
using SharedSettings = std::vector<std::pair<std::string, std::string>>;
SharedSettings shared_settings(const JobConfig& config);

// All-gathers a hash of each shared setting. Where any differs, every rank
// throws the same kind of ConfigError naming each differing setting, this
// rank's value and the ranks that hold another.
void check_ranks_agree(const SharedSettings& settings, comm::ProcessGroup& workers);

}  // namespace meshtrain
