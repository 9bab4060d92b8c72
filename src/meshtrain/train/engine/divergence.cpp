#include "meshtrain/train/engine/divergence.hpp"

#include <cmath>
#include <cstdio>
#include <string>

#include "meshtrain/core/error.hpp"
#include "meshtrain/kernels/backend.hpp"

namespace meshtrain {
namespace {

// The index of the first view (in the store's order) with a non-finite
// gradient element in what this rank holds; -1 when all are finite. Off the
// CPU the gradients are downloaded first (once, on the way out of a run).
int64_t first_nonfinite_view(const ParamStore& store, const HeldGradients& held) {
  std::vector<float> downloaded;
  HeldGradients on_host = held;
  if (!store.on_host()) {
    downloaded.resize(held.values.size());
    kernels::backend_for(store.device())
        .allocator()
        .download(downloaded.data(), held.values.data(), held.values.size_bytes());
    on_host.values = downloaded;
  }
  const std::vector<ParamView>& views = store.views();
  for (size_t v = 0; v < views.size(); ++v)
    for (const HeldPart& part : held_parts(on_host, views[v]))
      for (float x : part.values)
        if (!std::isfinite(x)) return static_cast<int64_t>(v);
  return -1;
}

std::string number(float v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", static_cast<double>(v));
  return buf;
}

}  // namespace

void stop_diverged(const StepContext& ctx, const HeldGradients& held, int64_t step, float loss, float grad_norm) {
  const ParamStore& store = ctx.model.store();
  const int64_t micro_batch = ctx.micro_batches.first_nonfinite_loss();
  const int64_t view = first_nonfinite_view(store, held);
  const double mine[2] = {double(micro_batch), double(view)};
  const std::vector<std::vector<double>> all = ctx.workers.all_gather_workers(mine);
  std::string ranks, gradient_ranks;
  for (size_t r = 0; r < all.size(); ++r) {
    if (all[r][0] != -1) {
      ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
      if (all[r][0] >= 0) ranks += " (micro-batch " + std::to_string(int64_t(all[r][0])) + ")";
    }
    if (all[r][1] >= 0) gradient_ranks += (gradient_ranks.empty() ? "" : ", ") + std::to_string(r);
  }
  std::string what = "step " + std::to_string(step + 1) + " diverged: loss " + number(loss) + ", gradient norm " +
                     number(grad_norm) + "; ";
  what += ranks.empty() ? "every worker's own loss was finite (the gradients were not)"
                        : "the loss was not finite on worker(s) " + ranks;
  if (view >= 0)
    what += "; first non-finite gradient here (worker " + std::to_string(ctx.workers.worker_rank()) +
            "): " + store.view(size_t(view)).name;
  else if (!gradient_ranks.empty())
    what += "; non-finite gradients on worker(s) " + gradient_ranks;
  what += ". Not restarted: the same data would diverge again. Resume from an earlier checkpoint with a lower "
          "optimizer.lr, optimizer.grad_clip, training.spike_sigma or training.skip_steps";
  throw DivergedError(what);
}

}  // namespace meshtrain
