#pragma once
// The data-parallel term of a job forecast (job_forecast.hpp): what a
// worker's step sends over its data-parallel group at its ZeRO stage, and
// how much of it hides behind compute.
//
// Per step with M micro-batches, over n data ranks (each collective an
// alpha-beta time, comm/collectives/cost_model.hpp; a unit's gather or
// reduce-scatter one ring all-gather of its bytes):
//   stage 0  an all-reduce of the gradients in the last micro-batch's
//            backward, one per bucket as GradientSync plans them
//            (parallel.bucket_mb; the first and the last 1 MiB)
//   stage 1  that, and an all-gather of the parameters after the update
//   stage 2  each micro-batch's reduce-scatter of every unit's gradients
//            (grad_reducer.hpp), and the all-gather after the update
//   stage 3  each micro-batch's gathers of the blocks before their forward
//            and their backward and reduce-scatter of every unit; the
//            whole-step units (embeddings, final norm) gathered once a step
//   plus the loss and norm sums, and under expert parallelism the experts'
//   all-reduce over the ranks holding the same experts.
//
// Hidden: on the CPU nothing (the communicator's copying and adding takes
// core time from compute). Workers on devices run their collectives on a
// stream of their own beside compute (NCCL), so the buckets and a block's
// reduce-scatter run behind the backward still to come (a bucket from when
// backward has made its share of the parameters' gradients) and a block's
// prefetched gather behind the one before it (cost_model.hpp's
// exposed_seconds, with the pieces spread evenly over the probe's forward
// or backward of one micro-batch; a pipeline's, the largest stage's on one
// chunk). The gathers after the update, the whole-step units, the
// experts' all-reduce and the sums stay exposed.
#include <cstddef>

#include "meshtrain/comm/collectives/algorithm.hpp"
#include "meshtrain/comm/collectives/cost_model.hpp"
#include "meshtrain/core/param_store.hpp"
#include "meshtrain/train/forecast/job_forecast.hpp"

namespace meshtrain {

struct DataParallelStep {
  comm::AllReduceAlgorithm algorithm = comm::AllReduceAlgorithm::Auto;  // parallel.all_reduce
  int ways = 1;  // data-parallel ranks
  int micro_batches = 1;
  size_t bucket_bytes = 0;  // GradientSync's buckets (stages 0 and 1)
  // parallel.reduce_dtype = "bf16": the gradients' collectives and ZeRO-3's
  // gathers carry 2 bytes an element (the updated parameters' gather, 4).
  bool bf16_wire = false;
  // One micro-batch's forward and backward as probed, the compute the
  // collectives can hide behind; both 0: nothing hides (the CPU).
  double forward_s = 0, backward_s = 0;
};

// Sets f.algorithm, f.comm_s, f.comm_hidden_s and f.comm_bytes from the
// store's gradients (its views' `expert` flags; f.zero_stage, f.expert).
void add_data_parallel_comm(const DataParallelStep& step, const ParamStore& store, const comm::CostTable& links,
                            const comm::CostTable& expert_links, JobForecast& f);

}  // namespace meshtrain
