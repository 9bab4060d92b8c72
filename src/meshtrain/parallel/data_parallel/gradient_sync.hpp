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
// A store off the CPU (training.device) goes through host memory, the
// host-staged path (docs/gpu.md): a bucket is downloaded into a host copy
// of the gradients when backward has announced it, reduced there by the
// host's collectives (shm, TCP, MPI), and uploaded when finish_backward()
// has it; the parameters' broadcast likewise. The same sums in the same
// order, so the same bits as on the CPU; every bucket costs the device a
// wait, so it is a path for correctness (several ranks on one device, no
// NCCL), not for speed.
#include <cstddef>
#include <vector>

#include "meshtrain/comm/group/process_group.hpp"
#include "meshtrain/core/bf16.hpp"
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

// Communication of one step, for the overlap report.
struct GradientSyncStats {
  double busy_s = 0;     // time the communication thread spent on this step's buckets
  double exposed_s = 0;  // time finish_backward() waited for them (not hidden by backward)
  size_t bytes = 0;      // gradient bytes all-reduced by this rank
  double hidden_share() const { return busy_s > 0 ? 1.0 - std::min(1.0, exposed_s / busy_s) : 1.0; }
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
  // Bf16: the bucket's reduced sum, widened into the gradients and divided by the ranks.
  void widen_average(size_t bucket);
  // The group a bucket is reduced over; null: nothing to reduce.
  comm::ProcessGroup* group_of(const GradientBucket& bucket) const;
  // Where the collectives read and write a bucket's gradients (or the
  // parameters' range): the store's own on the CPU, else the host copy.
  std::span<float> host_grads(const GradientBucket& bucket);
  // Off the CPU: the bucket's gradients from the device into the host copy, and back.
  void fetch_from_device(const GradientBucket& bucket);
  void return_to_device(const GradientBucket& bucket);
  void broadcast_staged_parameters(comm::ProcessGroup& group, size_t begin, size_t count);

  ParamStore& store_;
  comm::ProcessGroup& group_;
  GradientSyncOptions options_;
  ExpertReduction experts_;
  std::vector<GradientBucket> buckets_;
  std::vector<size_t> bucket_of_view_;
  std::vector<char> announced_;       // per view, this step
  std::vector<size_t> waiting_;       // per bucket: tensors not yet announced
  std::vector<comm::WorkHandle> work_;  // per bucket, this step
  std::vector<AlignedBuffer<Bf16>> staged_;  // per bucket, bf16 only: the rounded gradients on the wire
  AlignedBuffer<float> host_copy_{MemoryKind::Communication};  // off the CPU: the flat gradients in host memory
  size_t next_launch_ = 0;
  bool in_backward_ = false;
};

}  // namespace meshtrain::parallel
