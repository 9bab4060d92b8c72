#pragma once
// A parameter-server worker (parallel.data = "parameter_server"): pulls the
// current parameters from every server, computes the gradient of one batch
// of its own, clips it, pushes it, and repeats until a server says the job is
// done (parallel/parameter_server/server.hpp has the termination rule).
//
// Data: worker r of n takes slice r of each global batch of a
// DistributedSampler over n ranks, so workers draw different samples; its
// k-th batch is that of global step k, with k its clock. A restarted worker
// rejoins under its rank: server 0 tells it its clock (its old one, or the
// slowest live worker's if that is ahead: server_state.hpp) and it resumes
// the sample order there, so it redraws the batch it died computing or skips
// the batches its rank missed while it was away.
//
// On a device (training.device, opened by the caller) the model computes
// there; the servers stay on CPUs, so a pull uploads the parameters and a
// push downloads the gradients (the host-staged path, docs/gpu.md).
//
// No evaluation or checkpoint here: server 0 saves the final parameters.
// --resume and --stop-at-step do not apply (the servers own the job's state).
#include "meshtrain/core/device.hpp"
#include "meshtrain/train/config/job_config.hpp"
#include "meshtrain/train/loop/train_options.hpp"

namespace meshtrain {

// Reads its rank and the servers from the launch environment (ps_job.hpp).
// Returns when the job is done; throws CommError naming the server when one
// cannot be reached, dies or times out.
TrainSummary train_parameter_server_worker(const JobConfig& config, const TrainOptions& options,
                                           const Device& device = {});

}  // namespace meshtrain
