#include "meshtrain/parallel/data_parallel/gradient_sync.hpp"

#include <chrono>

#include "meshtrain/core/error.hpp"
#include "meshtrain/kernels/bf16.hpp"

namespace meshtrain::parallel {

GradientSync::GradientSync(ParamStore& store, comm::ProcessGroup& group, GradientSyncOptions options,
                           ExpertReduction experts)
    : store_(store),
      group_(group),
      options_(options),
      experts_(experts),
      buckets_(plan_gradient_buckets(store, options.bucket_bytes, options.first_bucket_bytes)),
      bucket_of_view_(store.views().size()),
      announced_(store.views().size()),
      waiting_(buckets_.size()),
      work_(buckets_.size()) {
  for (size_t b = 0; b < buckets_.size(); ++b)
    for (size_t v = buckets_[b].first_view; v < buckets_[b].end_view; ++v) bucket_of_view_[v] = b;
  if (options_.dtype == Precision::Bf16) {
    staged_.reserve(buckets_.size());
    for (const GradientBucket& bucket : buckets_) staged_.emplace_back(bucket.elements(), MemoryKind::Communication);
  }
  if (!store_.on_host()) host_copy_.resize(store_.flat_size());
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

comm::ProcessGroup* GradientSync::group_of(const GradientBucket& bucket) const {
  comm::ProcessGroup* g = bucket.expert && experts_.ways > 1 ? experts_.group : &group_;
  return g && g->size() > 1 ? g : nullptr;
}

std::span<float> GradientSync::host_grads(const GradientBucket& bucket) {
  return (store_.on_host() ? store_.grads() : host_copy_.span()).subspan(bucket.begin, bucket.elements());
}

void GradientSync::fetch_from_device(const GradientBucket& bucket) {
  if (!store_.on_host()) store_.download_grads_range(bucket.begin, host_grads(bucket));
}

void GradientSync::return_to_device(const GradientBucket& bucket) {
  if (!store_.on_host()) store_.upload_grads_range(bucket.begin, host_grads(bucket));
}

void GradientSync::broadcast_staged_parameters(comm::ProcessGroup& group, size_t begin, size_t count) {
  const std::span<float> host = host_copy_.span().subspan(begin, count);  // the gradients' copy, free until backward
  store_.download_params_range(begin, host);
  group.broadcast(host, 0);
  store_.upload_params_range(begin, host);
}

void GradientSync::broadcast_parameters() {
  auto broadcast = [&](comm::ProcessGroup& group, size_t begin, size_t count) {
    if (store_.on_host())
      group.broadcast(store_.params().subspan(begin, count), 0);
    else
      broadcast_staged_parameters(group, begin, count);
  };
  if (experts_.ways == 1) {
    if (group_.size() > 1) broadcast(group_, 0, store_.flat_size());
    return;
  }
  for (const GradientBucket& bucket : buckets_)
    if (comm::ProcessGroup* g = group_of(bucket)) broadcast(*g, bucket.begin, bucket.elements());
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
  comm::ProcessGroup* group = group_of(bucket);
  if (!group) return;
  fetch_from_device(bucket);
  const std::span<float> grads = host_grads(bucket);
  if (!staged_.empty()) {
    kernels::to_bf16(grads.data(), staged_[b].data(), grads.size());
    work_[b] = group->all_reduce_async(staged_[b].span(), comm::ReduceKind::Sum, options_.algorithm);
    return;
  }
  // Avg divides on the communication thread, so backward's thread never
  // makes a pass over the gradients for it.
  work_[b] = group->all_reduce_async(grads, comm::ReduceKind::Avg, options_.algorithm);
}

void GradientSync::widen_average(size_t b) {
  const GradientBucket& bucket = buckets_[b];
  const float ranks = static_cast<float>(group_of(bucket)->size());
  float* g = host_grads(bucket).data();
  const Bf16* sum = staged_[b].data();
  for (size_t i = 0; i < bucket.elements(); ++i) g[i] = to_float(sum[i]) / ranks;  // as Avg divides
}

GradientSyncStats GradientSync::finish_backward() {
  if (!in_backward_) throw Error("GradientSync::finish_backward() without start_backward()");
  in_backward_ = false;
  while (next_launch_ < buckets_.size()) launch(next_launch_++);
  GradientSyncStats stats;
  const auto wait_start = std::chrono::steady_clock::now();
  for (size_t b = 0; b < buckets_.size(); ++b) {
    if (!work_[b]) continue;
    work_[b]->wait();
    stats.busy_s += work_[b]->busy_seconds();
    if (!staged_.empty()) {
      widen_average(b);
      stats.bytes += buckets_[b].elements() * sizeof(Bf16);
    } else {
      stats.bytes += buckets_[b].elements() * sizeof(float);
    }
    work_[b].reset();
  }
  stats.exposed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wait_start).count();
  const float share = 1.0f / static_cast<float>(experts_.ways);
  for (const GradientBucket& bucket : buckets_) {
    const bool reduced = group_of(bucket) != nullptr, scaled = bucket.expert && experts_.ways > 1;
    if (!reduced && !scaled) continue;
    if (!reduced) fetch_from_device(bucket);
    if (scaled)
      for (float& g : host_grads(bucket)) g *= share;
    return_to_device(bucket);
  }
  return stats;
}

}  // namespace meshtrain::parallel
