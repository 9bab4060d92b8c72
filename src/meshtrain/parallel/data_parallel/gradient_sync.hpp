#pragma once
// Synchronous data parallelism's gradient exchange (what PyTorch calls DDP's
// reducer): every worker holds the whole model; after backward each holds the
// average of all workers' gradients, bit-identical on every worker.
//
// The buckets of plan_gradient_buckets() are all-reduced as soon as backward
// has announced every tensor in them (ParamStore::grad_ready), in bucket
// order, on the communicator's thread, so they travel while backward goes on.
// Bucket order is the same on every rank (the plan and the order of
// announcements are), which the communicator's ordering rule needs.
//
// Under expert parallelism (ExpertReduction) the expert tensors' buckets
// are averaged over the ranks holding the same experts instead, then
// divided by the expert ways: each expert's gradient already sums the
// tokens of its whole expert group (they came by all-to-all), so the result
// is the global batch's mean, as for the dense tensors.
//
// The collectives are the device collectives of comm/device/: on the CPU
// and, staged through host memory, on any other device (docs/gpu.md) they
// are the host's (shm, TCP, MPI) with the same sums in the same order, so
// the same bits; each staged bucket costs the device a wait, so that path
// is for correctness (several ranks on one device, no NCCL), not speed.
// Under bf16 on the wire a bucket is rounded by the store's backend where
// the gradients are, so half the bytes travel, and widened and averaged
// there after.
#include <cstddef>
#include <vector>

#include "meshtrain/comm/device/device_collectives.hpp"
#include "meshtrain/comm/group/process_group.hpp"
#include "meshtrain/core/bf16.hpp"
#include "meshtrain/core/device_array.hpp"
#include "meshtrain/core/param_store.hpp"
#include "meshtrain/parallel/data_parallel/gradient_buckets.hpp"

namespace meshtrain::parallel {

struct GradientSyncOptions {
  comm::AllReduceAlgorithm algorithm = comm::AllReduceAlgorithm::Auto;
  size_t bucket_bytes = size_t{25} << 20;
  size_t first_bucket_bytes = size_t{1} << 20;
  // Bf16: each bucket is rounded to bf16, summed in bf16 (each combining
  // step in fp32, rounded back), then widened and divided by the ranks.
  Precision dtype = Precision::Fp32;
};

// The all-reduce of one step's buckets, for the overlap report.
struct GradientSyncStats {
  double busy_s = 0;     // time the communication thread spent on this step's buckets
  double exposed_s = 0;  // how long they held up the step past backward (comm/device/overlap_ledger.hpp):
                         // host-staged, finish_backward()'s wait; over NCCL, the device's time from
                         // backward's end on the compute stream to the last bucket's end
  size_t bytes = 0;      // gradient bytes all-reduced by this rank
};

struct ExpertReduction {
  comm::ProcessGroup* group = nullptr;  // the data ranks with the same experts; null: just this one
  int ways = 1;                         // expert-parallel ways
};

class GradientSync {
 public:
  // Installs a grad-ready hook on `store`; the store and groups must outlive this.
  GradientSync(ParamStore& store, comm::ProcessGroup& group, GradientSyncOptions options, ExpertReduction experts = {});
  ~GradientSync();
  GradientSync(const GradientSync&) = delete;
  GradientSync& operator=(const GradientSync&) = delete;

  // Makes every worker's parameters equal to group rank 0's (the expert
  // tensors: to expert-data group rank 0's).
  void broadcast_parameters();
  // Before backward: no bucket is ready yet.
  void start_backward();
  // After backward: starts the buckets still waiting and waits for all.
  // Throws CommError when a peer fails.
  GradientSyncStats finish_backward();

  const std::vector<GradientBucket>& buckets() const { return buckets_; }

 private:
  void on_grad_ready(size_t view);
  void launch_ready_buckets();
  void launch(size_t bucket);
  // The collectives a bucket is reduced over; null: nothing to reduce.
  comm::DeviceCollectives* collectives_of(const GradientBucket& bucket) const;
  // A bucket's gradients where the store's kernels read them.
  float* kernel_grads(const GradientBucket& bucket);

  ParamStore& store_;
  GradientSyncOptions options_;
  ExpertReduction experts_;
  std::unique_ptr<comm::DeviceCollectives> data_collectives_;    // over the group; null: one rank
  std::unique_ptr<comm::DeviceCollectives> expert_collectives_;  // over experts.group; null: none or one rank
  std::vector<GradientBucket> buckets_;
  std::vector<size_t> bucket_of_view_;
  std::vector<char> announced_;       // per view, this step
  std::vector<size_t> waiting_;       // per bucket: tensors not yet announced
  std::vector<comm::DeviceWorkHandle> work_;  // per bucket, this step
  std::vector<DeviceArray<Bf16>> wire_;  // per bucket, bf16 only: the rounded gradients, in the store's memory
  size_t next_launch_ = 0;
  bool in_backward_ = false;
};

}  // namespace meshtrain::parallel
