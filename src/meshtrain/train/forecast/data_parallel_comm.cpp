#include "meshtrain/train/forecast/data_parallel_comm.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include "meshtrain/parallel/data_parallel/gradient_buckets.hpp"

namespace meshtrain {
namespace {

// The units as ZeRO moves them: the blocks, one after another through
// forward and backward, and the whole-step units, each once a step.
struct UnitSplit {
  size_t block_bytes = 0, whole_bytes = 0;
  int blocks = 0, wholes = 0;
};

UnitSplit split_units(const ParamStore& store, size_t grad_bytes) {
  UnitSplit split;
  for (const ParamUnit& u : store.units()) {
    const size_t bytes = u.size() * sizeof(float);
    if (u.whole_step) split.whole_bytes += bytes, ++split.wholes;
    else split.block_bytes += bytes, ++split.blocks;
  }
  if (split.blocks + split.wholes == 0) split.whole_bytes = grad_bytes, split.wholes = 1;  // one flat unit
  return split;
}

// One ring all-gather (or reduce-scatter) per unit of `units` holding
// `bytes` together: the bytes once, the latency per unit.
double per_unit_seconds(const comm::CostTable& links, size_t bytes, int units, int n) {
  if (units == 0) return 0.0;
  return comm::all_gather_seconds(links, bytes, n) +
         (units - 1) * (n - 1) * links.row(comm::AllReduceAlgorithm::Ring).alpha_s;
}

// Stages 0 and 1: GradientSync's buckets (gradient_buckets.hpp, planned as
// the runtime plans them), each its own all-reduce; bucket i ready once
// backward has made the gradients of buckets 0..i, taken as that share of
// the window (compute in proportion to parameters). Expert buckets under
// expert parallelism are reduced over other ranks (the expert term).
struct Buckets {
  std::vector<double> seconds, ready_s;
  double total_s = 0;
};

Buckets dense_buckets(const DataParallelStep& step, const ParamStore& store, bool experts_apart, double wire,
                      const comm::CostTable& links, comm::AllReduceAlgorithm algorithm) {
  const size_t bucket_bytes = std::max<size_t>(1, step.bucket_bytes);
  const size_t first_bytes = std::min<size_t>(size_t{1} << 20, bucket_bytes);  // as step_machinery.cpp sets it
  const auto plan = parallel::plan_gradient_buckets(store, bucket_bytes, first_bytes);
  size_t all = 0, done = 0;
  for (const auto& b : plan) all += b.elements();
  Buckets buckets;
  for (const auto& b : plan) {
    done += b.elements();
    if (experts_apart && b.expert) continue;
    const double s = comm::all_reduce_seconds(links, algorithm, size_t(double(b.elements() * sizeof(float)) * wire),
                                              step.ways);
    buckets.seconds.push_back(s);
    buckets.ready_s.push_back(step.backward_s * double(done) / double(std::max<size_t>(1, all)));
    buckets.total_s += s;
  }
  return buckets;
}

struct StageComm {
  double seconds = 0, exposed_s = 0, bytes = 0;
};

// The ZeRO stage's collectives (data_parallel_comm.hpp's table) and what
// of them runs past the compute windows.
// `w`: the bytes on the wire per fp32 byte (1, or 0.5 with bf16 on it).
StageComm stage_comm(const DataParallelStep& step, int stage, const ParamStore& store, bool experts_apart,
                     size_t grad_bytes, double w, const comm::CostTable& links, comm::AllReduceAlgorithm algorithm) {
  const UnitSplit units = split_units(store, grad_bytes);
  const int n = step.ways, k = std::max(1, units.blocks);
  const double M = step.micro_batches, share = double(n - 1) / n;
  // The updated parameters' gather (stages 1, 2) stays fp32; the gradients
  // and ZeRO-3's gathers go in the wire's dtype.
  const double flat_s = per_unit_seconds(links, units.block_bytes, units.blocks, n) +
                        per_unit_seconds(links, units.whole_bytes, units.wholes, n);
  const double blocks_s = per_unit_seconds(links, size_t(double(units.block_bytes) * w), units.blocks, n);
  const double whole_s = per_unit_seconds(links, size_t(double(units.whole_bytes) * w), units.wholes, n);
  const double flat_bytes = share * double(grad_bytes);
  if (stage <= 1) {
    const Buckets buckets = dense_buckets(step, store, experts_apart, w, links, algorithm);
    const double gather = stage == 1 ? flat_s : 0.0;
    return {buckets.total_s + gather, comm::exposed_seconds(buckets.seconds, buckets.ready_s, step.backward_s) + gather,
            2 * w * flat_bytes + (stage == 1 ? flat_bytes : 0.0)};
  }
  if (stage == 2)
    return {M * (blocks_s + whole_s) + flat_s,
            M * (comm::exposed_seconds(blocks_s / k, k, step.backward_s) + whole_s) + flat_s,
            M * w * flat_bytes + flat_bytes};
  const double block_share = w * share * double(units.block_bytes), whole_share = w * share * double(units.whole_bytes);
  return {M * (3 * blocks_s + whole_s) + whole_s,
          M * (comm::exposed_seconds(blocks_s / k, k, step.forward_s) +
               comm::exposed_seconds(2 * blocks_s / k, k, step.backward_s) + whole_s) +
              whole_s,
          M * (3 * block_share + whole_share) + whole_share};
}

}  // namespace

void add_data_parallel_comm(const DataParallelStep& step, const ParamStore& store, const comm::CostTable& links,
                            const comm::CostTable& expert_links, JobForecast& f) {
  const int n = step.ways;
  size_t expert_bytes = 0;
  if (f.expert > 1)
    for (const ParamView& v : store.views())
      if (v.expert) expert_bytes += v.numel * sizeof(float);
  const size_t grad_bytes = store.flat_size() * sizeof(float) - expert_bytes;
  const double w = step.bf16_wire ? 0.5 : 1.0;
  comm::AllReduceAlgorithm algorithm = step.algorithm;
  if (algorithm == comm::AllReduceAlgorithm::Auto)
    algorithm = comm::choose_all_reduce(links, size_t(double(grad_bytes) * w), n);
  f.algorithm = std::string(comm::algorithm_name(algorithm));
  const StageComm stage = stage_comm(step, f.zero_stage, store, f.expert > 1, grad_bytes, w, links, algorithm);
  f.comm_s = stage.seconds;
  f.comm_bytes = stage.bytes;
  // Nothing hides without a window (the CPU): exactly 0, not the rounding of a sum and its parts.
  f.comm_hidden_s = step.backward_s > 0 ? std::max(0.0, stage.seconds - stage.exposed_s) : 0.0;
  f.comm_s += 2 * comm::all_reduce_seconds(links, comm::AllReduceAlgorithm::Ring, sizeof(double), n);
  const int holders = n / f.expert;
  if (expert_bytes > 0 && holders > 1) {
    const comm::AllReduceAlgorithm chosen = comm::choose_all_reduce(expert_links, expert_bytes, holders);
    const double wire_bytes = double(expert_bytes) * w;
    f.comm_s += comm::all_reduce_seconds(expert_links, chosen, size_t(wire_bytes), holders);
    f.comm_bytes += 2.0 * (holders - 1) / holders * wire_bytes;
  }
}

}  // namespace meshtrain
