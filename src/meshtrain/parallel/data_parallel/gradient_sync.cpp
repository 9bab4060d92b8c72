#include "meshtrain/parallel/data_parallel/gradient_sync.hpp"

#include "meshtrain/comm/device/overlap_ledger.hpp"
#include "meshtrain/core/error.hpp"
#include "meshtrain/nn/backend.hpp"
#include "meshtrain/parallel/device_collectives.hpp"

namespace meshtrain::parallel {
namespace {

std::unique_ptr<comm::DeviceCollectives> collectives_over(comm::ProcessGroup* group, const ParamStore& store,
                                                          comm::AllReduceAlgorithm algorithm) {
  if (!group || group->size() < 2) return nullptr;
  return device_collectives_for(*group, store, algorithm);
}

}  // namespace

GradientSync::GradientSync(ParamStore& store, comm::ProcessGroup& group, GradientSyncOptions options,
                           ExpertReduction experts)
    : store_(store),
      options_(options),
      experts_(experts),
      data_collectives_(collectives_over(&group, store, options.algorithm)),
      expert_collectives_(experts.ways > 1 ? collectives_over(experts.group, store, options.algorithm) : nullptr),
      buckets_(plan_gradient_buckets(store, options.bucket_bytes, options.first_bucket_bytes)),
      bucket_of_view_(store.views().size()),
      announced_(store.views().size()),
      waiting_(buckets_.size()),
      work_(buckets_.size()) {
  for (size_t b = 0; b < buckets_.size(); ++b)
    for (size_t v = buckets_[b].first_view; v < buckets_[b].end_view; ++v) bucket_of_view_[v] = b;
  if (options_.dtype == Precision::Bf16) {
    wire_.reserve(buckets_.size());
    for (const GradientBucket& bucket : buckets_) {
      wire_.emplace_back(nn::memory_of(store_), MemoryKind::Communication);
      wire_.back().resize(bucket.elements());
    }
  }
  store_.set_grad_ready_hook([this](size_t view) { on_grad_ready(view); });
}

GradientSync::~GradientSync() {
  store_.set_grad_ready_hook(nullptr);
  // Buckets still in flight (a step abandoned by an exception) write into
  // the store's buffer: let them finish before it can go away.
  for (auto& w : work_) {
    if (!w) continue;
    try {
      w->wait();
    } catch (const std::exception&) {
    }
  }
}

comm::DeviceCollectives* GradientSync::collectives_of(const GradientBucket& bucket) const {
  return bucket.expert && experts_.ways > 1 ? expert_collectives_.get() : data_collectives_.get();
}

float* GradientSync::kernel_grads(const GradientBucket& bucket) { return store_.kernel_grads().data() + bucket.begin; }

void GradientSync::broadcast_parameters() {
  float* params = store_.kernel_params().data();
  if (experts_.ways == 1) {
    if (data_collectives_) data_collectives_->broadcast(comm::Buffer(std::span(params, store_.flat_size())), 0);
    return;
  }
  for (const GradientBucket& bucket : buckets_)
    if (comm::DeviceCollectives* c = collectives_of(bucket))
      c->broadcast(comm::Buffer(std::span(params + bucket.begin, bucket.elements())), 0);
}

void GradientSync::start_backward() {
  std::fill(announced_.begin(), announced_.end(), 0);
  for (size_t b = 0; b < buckets_.size(); ++b) {
    waiting_[b] = buckets_[b].end_view - buckets_[b].first_view;
    work_[b].reset();
  }
  next_launch_ = 0;
  in_backward_ = true;
}

void GradientSync::on_grad_ready(size_t view) {
  // Outside a data-parallel backward (evaluation, tests), or a tensor
  // announced twice (it would be a bug in a layer): nothing to do.
  if (!in_backward_ || view >= announced_.size() || announced_[view]) return;
  announced_[view] = 1;
  --waiting_[bucket_of_view_[view]];
  launch_ready_buckets();
}

void GradientSync::launch_ready_buckets() {
  while (next_launch_ < buckets_.size() && waiting_[next_launch_] == 0) launch(next_launch_++);
}

void GradientSync::launch(size_t b) {
  const auto& bucket = buckets_[b];
  comm::DeviceCollectives* collectives = collectives_of(bucket);
  if (!collectives) return;
  if (!wire_.empty()) {
    Bf16* wire = wire_[b].raw();
    nn::backend_of(store_).to_bf16(kernel_grads(bucket), wire, bucket.elements());
    work_[b] = collectives->all_reduce_async(comm::Buffer(std::span(wire, bucket.elements())), comm::ReduceKind::Sum);
    return;
  }
  // Avg divides on the communication thread, so backward's thread never
  // makes a pass over the gradients for it.
  work_[b] = collectives->all_reduce_async(comm::Buffer(std::span(kernel_grads(bucket), bucket.elements())),
                                           comm::ReduceKind::Avg);
}

GradientSyncStats GradientSync::finish_backward() {
  if (!in_backward_) throw Error("GradientSync::finish_backward() without start_backward()");
  in_backward_ = false;
  while (next_launch_ < buckets_.size()) launch(next_launch_++);
  GradientSyncStats stats;
  kernels::Backend& backend = nn::backend_of(store_);
  comm::DeviceCollectives* marker = nullptr;  // any bucket's: they share the compute stream
  for (size_t b = 0; b < buckets_.size() && !marker; ++b)
    if (work_[b]) marker = collectives_of(buckets_[b]);
  // The buckets are waited for one after another just before the norm, which
  // waits for the device anyway: settled here.
  comm::OverlapLedger ledger;
  if (marker) ledger.begin_waits(*marker);
  for (size_t b = 0; b < buckets_.size(); ++b) {
    if (!work_[b]) continue;
    work_[b]->wait();
    ledger.waited(std::move(work_[b]));
    const GradientBucket& bucket = buckets_[b];
    if (!wire_.empty()) {  // the sum, averaged as Avg divides
      backend.widen_divided(wire_[b].raw(), kernel_grads(bucket), bucket.elements(),
                            static_cast<float>(collectives_of(bucket)->size()));
      stats.bytes += bucket.elements() * sizeof(Bf16);
    } else {
      stats.bytes += bucket.elements() * sizeof(float);
    }
  }
  const comm::CommTime time = ledger.settle();
  stats.busy_s = time.busy_s;
  stats.exposed_s = time.exposed_s;
  if (experts_.ways > 1) {
    const float share = 1.0f / static_cast<float>(experts_.ways);
    for (const GradientBucket& bucket : buckets_)
      if (bucket.expert) backend.scale(kernel_grads(bucket), bucket.elements(), share);
  }
  return stats;
}

}  // namespace meshtrain::parallel
