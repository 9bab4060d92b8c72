#include "meshtrain/parallel/data_parallel/gradient_sync.hpp"

#include <chrono>

#include "meshtrain/core/error.hpp"

namespace meshtrain::parallel {

GradientSync::GradientSync(ParamStore& store, comm::ProcessGroup& group, GradientSyncOptions options)
    : store_(store),
      group_(group),
      options_(options),
      buckets_(plan_gradient_buckets(store, options.bucket_bytes, options.first_bucket_bytes)),
      bucket_of_view_(store.views().size()),
      announced_(store.views().size()),
      waiting_(buckets_.size()),
      work_(buckets_.size()) {
  for (size_t b = 0; b < buckets_.size(); ++b)
    for (size_t v = buckets_[b].first_view; v < buckets_[b].end_view; ++v) bucket_of_view_[v] = b;
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

void GradientSync::broadcast_parameters(int root) {
  if (group_.size() > 1) group_.broadcast(store_.params(), root);
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
  if (group_.size() == 1) return;
  const auto& bucket = buckets_[b];
  // Avg divides on the communication thread, so backward's thread never
  // makes a pass over the gradients for it.
  work_[b] = group_.all_reduce_async(store_.grads().subspan(bucket.begin, bucket.elements()), comm::ReduceKind::Avg,
                                     options_.algorithm);
}

GradientSyncStats GradientSync::finish_backward() {
  if (!in_backward_) throw Error("GradientSync::finish_backward() without start_backward()");
  in_backward_ = false;
  while (next_launch_ < buckets_.size()) launch(next_launch_++);
  GradientSyncStats stats;
  if (group_.size() == 1) return stats;
  const auto wait_start = std::chrono::steady_clock::now();
  for (size_t b = 0; b < buckets_.size(); ++b) {
    work_[b]->wait();
    stats.busy_s += work_[b]->busy_seconds();
    stats.bytes += buckets_[b].elements() * sizeof(float);
    work_[b].reset();
  }
  stats.exposed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wait_start).count();
  return stats;
}

}  // namespace meshtrain::parallel
