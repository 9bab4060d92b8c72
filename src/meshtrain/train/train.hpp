#pragma once
// `meshtrain train`'s entry into this layer: which kind of worker this
// process is. Above the rooms it picks between (loop/ and ps/), so neither
// of them includes the other's loop.
#include "meshtrain/train/config/job_config.hpp"
#include "meshtrain/train/loop/train_options.hpp"

namespace meshtrain {

// With parallel.data = "parameter_server" this process is one asynchronous
// worker (ps/ps_worker.hpp); otherwise a synchronous worker, alone or one of
// a job's mesh (loop/trainer.hpp).
TrainSummary train(const JobConfig& config, const TrainOptions& options);

}  // namespace meshtrain
