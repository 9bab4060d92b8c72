#include "meshtrain/plan/recommendation.hpp"

#include <algorithm>
#include <cstdio>

#include "meshtrain/plan/strategies.hpp"

namespace meshtrain::plan {

std::string format_gb(double bytes) {
  char text[32];
  if (bytes < 1e9)
    std::snprintf(text, sizeof text, "%.1f MB", bytes / 1e6);
  else
    std::snprintf(text, sizeof text, bytes < 10e9 ? "%.2f GB" : "%.1f GB", bytes / 1e9);
  return text;
}

std::string format_seconds(double seconds) {
  char text[32];
  if (seconds < 1e-3)
    std::snprintf(text, sizeof text, "%.1f us", seconds * 1e6);
  else if (seconds < 1)
    std::snprintf(text, sizeof text, "%.1f ms", seconds * 1e3);
  else
    std::snprintf(text, sizeof text, "%.2f s", seconds);
  return text;
}

std::string format_days(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f days", seconds / 86400);
  return text;
}

namespace {

constexpr double kDay = 86400;
constexpr double kVeryLargeParameters = 20e9;  // "tens to hundreds of billions"

const StrategyEstimate* find(const std::vector<StrategyEstimate>& all, StrategyKind kind) {
  for (const StrategyEstimate& e : all)
    if (e.kind == kind) return &e;
  return nullptr;
}

bool usable(const StrategyEstimate* e) { return e && e->applicable && e->fits; }

// The fastest usable one of `kinds`, or null.
const StrategyEstimate* fastest(const std::vector<StrategyEstimate>& all, std::initializer_list<StrategyKind> kinds) {
  const StrategyEstimate* best = nullptr;
  for (StrategyKind kind : kinds) {
    const StrategyEstimate* e = find(all, kind);
    if (usable(e) && (!best || e->step_s < best->step_s)) best = e;
  }
  return best;
}

std::string devices_text(int n) { return std::to_string(n) + (n == 1 ? " device" : " devices"); }

std::string where(const PlanInput& in) {
  return in.cluster.nodes > 1 ? std::to_string(in.cluster.nodes) + " nodes x " +
                                    std::to_string(in.cluster.devices_per_node) + " " + in.cluster.device.name
                              : devices_text(in.cluster.devices()) + " (" + in.cluster.device.name + ") in one node";
}

std::string time_text(const StrategyEstimate& e) {
  return e.train_s > 0 ? format_days(e.train_s) + " to train (" + format_seconds(e.step_s) + " a step)"
                       : format_seconds(e.step_s) + " a step";
}

std::string fits_text(const StrategyEstimate& single, const PlanInput& in) {
  return format_gb(single.memory.total()) + " per device of " + format_gb(in.usable_bytes()) + " usable";
}

// Fewest devices (powers of two up to a node, then whole nodes) on which
// ring data parallelism meets the target time.
int devices_for_target(const PlanInput& in) {
  if (in.target_days <= 0 || training_amount(in).steps <= 0) return 0;
  const int per_node = in.cluster.devices_per_node;
  for (int n = 1; n <= 65536; n = n < per_node ? std::min(2 * n, per_node) : n + per_node) {
    PlanInput sized = in;
    sized.cluster.devices_per_node = std::min(n, per_node);
    sized.cluster.nodes = std::max(1, n / per_node);
    if (sized.global_batch < sized.cluster.devices()) break;
    const StrategyEstimate e =
        evaluate_strategy(sized, n == 1 ? StrategyKind::SingleDevice : StrategyKind::DataParallelRing);
    if (e.fits && e.train_s <= in.target_days * kDay) return n;
  }
  return 0;
}

// The smallest cluster of this device where something fits: more devices
// in a node up to the profile's node size, then more nodes (doubling).
bool find_smallest_fit(const PlanInput& in, SmallestFit& out) {
  const int per_node = std::max(in.cluster.devices_per_node, in.cluster.device.devices_per_node);
  for (int node_devices = in.cluster.devices_per_node, nodes = in.cluster.nodes; nodes <= 4096;) {
    if (node_devices < per_node)
      node_devices = std::min(2 * node_devices, per_node);
    else
      nodes *= 2;
    PlanInput sized = in;
    sized.cluster.devices_per_node = node_devices;
    sized.cluster.nodes = nodes;
    sized.global_batch = std::max<int64_t>(in.global_batch, sized.cluster.devices());
    const StrategyEstimate* best = nullptr;
    const std::vector<StrategyEstimate> all = evaluate_strategies(sized);
    for (const StrategyEstimate& e : all)
      if (usable(&e) && (!best || e.step_s < best->step_s)) best = &e;
    if (best) {
      out = {node_devices, nodes, *best};
      return true;
    }
  }
  return false;
}

// When several nodes are slower than one (a slow network between them),
// says so with the numbers.
std::string one_node_note(const PlanInput& in, const StrategyEstimate& chosen) {
  if (in.cluster.nodes < 2 || in.cluster.devices_per_node < 2) return "";
  PlanInput one = in;
  one.cluster.nodes = 1;
  const StrategyEstimate e = evaluate_strategy(one, StrategyKind::DataParallelRing);
  if (!e.fits || e.step_s >= chosen.step_s) return "";
  return " Even so, one node alone is faster (" + devices_text(one.cluster.devices()) + ": " +
         (e.train_s > 0 ? format_days(e.train_s) + " to train" : format_seconds(e.step_s) + " a step") +
         "): over " + in.cluster.inter.name + " more nodes do not pay; a faster network between nodes "
         "(gpudirect-rdma, infiniband-ndr) would.";
}

// What every rule below reads: the job, every strategy's estimate, the one
// device baseline and the time goal (0: none).
struct RecommendContext {
  const PlanInput& in;
  const std::vector<StrategyEstimate>& all;
  const StrategyEstimate& single;
  double target_s;
  int devices_for_target;

  // How `e` stands against the time goal, as a clause; empty without a goal.
  std::string goal_text(const StrategyEstimate& e) const {
    if (target_s <= 0 || e.train_s <= 0) return "";
    if (e.train_s <= target_s) return ", within the goal of " + format_days(target_s);
    return "; that misses the goal of " + format_days(target_s) +
           (devices_for_target > 0 ? " (ring data parallelism on " + devices_text(devices_for_target) + " meets it)"
                                   : " (more devices alone will not meet it)");
  }
  // One device's memory against what it offers.
  std::string need_text() const {
    return "needs " + format_gb(single.memory.total()) + " per device, " + format_gb(in.usable_bytes()) + " usable";
  }
};

// Each rule picks a strategy and explains it in `r` (returning true), or
// leaves `r` alone for the next rule. They run in the notes' order.

// Preemptible workers on a sparse model: asynchronous parameter servers.
bool pick_parameter_server(const RecommendContext& c, Recommendation& r) {
  const StrategyEstimate* ps = find(c.all, StrategyKind::ParameterServer);
  if (!c.in.preemptible || !c.in.sparse || !usable(ps)) return false;
  r.strategy = ps->kind;
  r.reason = "Many workers that may be preempted, and a sparse model: asynchronous parameter servers keep "
             "training when workers are lost and take pushes as they come (" + time_text(*ps) +
             "), at the cost of stale gradients.";
  return true;
}

// The model fits, and one device is all there is or already meets the goal.
bool pick_single_device(const RecommendContext& c, Recommendation& r) {
  const bool single_meets = c.target_s > 0 && c.single.train_s > 0 && c.single.train_s <= c.target_s;
  if (c.in.cluster.devices() != 1 && !single_meets) return false;
  r.strategy = c.single.kind;
  r.reason = "The model fits on one device (" + fits_text(c.single, c.in) + ") and " +
             (single_meets ? "one device meets the goal: " : "this is one device: ") + time_text(c.single) +
             "; no need to distribute.";
  return true;
}

// The model fits but the ring's gradient exchange between nodes is the
// bottleneck: communication is at least a quarter of the compute, hidden or
// not, and the Reduction Server saves at least 5% of the step.
bool pick_reduction_server(const RecommendContext& c, Recommendation& r) {
  const StrategyEstimate* ring = find(c.all, StrategyKind::DataParallelRing);
  const StrategyEstimate* rs = find(c.all, StrategyKind::ReductionServer);
  const double comm_share = usable(ring) ? ring->comm_exchange_s / ring->compute_s : 0;
  const bool exchange_bound =
      c.in.cluster.nodes > 1 && comm_share >= 0.25 && usable(rs) && rs->step_s <= 0.95 * ring->step_s;
  if (!exchange_bound) return false;
  r.strategy = rs->kind;
  char share[16];
  std::snprintf(share, sizeof share, "%.0f%%", 100 * comm_share);
  r.reason = "The model fits on one device, but across " + std::to_string(c.in.cluster.nodes) +
             " nodes the ring's gradient all-reduce takes " + format_seconds(ring->comm_exchange_s) + " a step (" +
             share + " of the compute): add the Reduction Server (worker pool 2), where each node sends its "
             "gradients once instead of about twice, " +
             format_seconds(ring->step_s) + " -> " + format_seconds(rs->step_s) + " a step" +
             (rs->train_s > 0 ? ", " + format_days(rs->train_s) + " to train" : "") + c.goal_text(*rs) + "." +
             one_node_note(c.in, *rs) + " Scale the learning rate with the global batch and add warmup.";
  return true;
}

// The model fits: the faster of ring and tree synchronous data parallelism.
bool pick_data_parallel(const RecommendContext& c, Recommendation& r) {
  const StrategyEstimate* dp = fastest(c.all, {StrategyKind::DataParallelRing, StrategyKind::DataParallelTree});
  if (!dp) return false;
  r.strategy = dp->kind;
  const double speedup = c.single.step_s / dp->step_s;
  char factor[32];
  std::snprintf(factor, sizeof factor, "%.1fx", speedup);
  r.reason = "The model fits on one device (" + fits_text(c.single, c.in) + "), so synchronous data parallelism: " +
             where(c.in) + " train it " + factor + " faster than one device after communication, " +
             time_text(*dp) + c.goal_text(*dp) + ". Scale the learning rate with the global batch and add warmup.";
  return true;
}

// A mixture of experts that does not fit: spread the experts.
bool pick_expert_parallel(const RecommendContext& c, Recommendation& r) {
  const StrategyEstimate* expert = find(c.all, StrategyKind::ExpertData);
  if (!usable(expert)) return false;
  r.strategy = expert->kind;
  r.reason = "A mixture-of-experts model that does not fit on one device: expert parallelism places " +
             std::to_string(c.in.model.experts / expert->layout.ep) + " of the " +
             std::to_string(c.in.model.experts) + " experts on each device (" + format_gb(expert->memory.total()) +
             " per device), " + time_text(*expert) + c.goal_text(*expert) + ".";
  return true;
}

// The lowest ZeRO stage that fits, or null.
const StrategyEstimate* lowest_fitting_zero(const std::vector<StrategyEstimate>& all) {
  for (StrategyKind kind : {StrategyKind::Zero1, StrategyKind::Zero2, StrategyKind::Zero3})
    if (usable(find(all, kind))) return find(all, kind);
  return nullptr;
}

void explain_sharded(const RecommendContext& c, const StrategyEstimate& sharded, Recommendation& r) {
  r.strategy = sharded.kind;
  r.reason = "The model does not fit on one device (" + c.need_text() + "): sharded data parallelism (ZeRO stage " +
             std::to_string(zero_stage(sharded.kind)) + (sharded.kind == StrategyKind::Zero3 ? ", FSDP" : "") +
             ") over " + devices_text(c.in.cluster.devices()) + " leaves " + format_gb(sharded.memory.total()) +
             " per device, with less code than tensor or pipeline parallelism; " + time_text(sharded) +
             c.goal_text(sharded) + ".";
}

void explain_model_parallel(const RecommendContext& c, const StrategyEstimate& model_parallel, bool sharding_fits,
                            Recommendation& r) {
  r.strategy = model_parallel.kind;
  const Layout& l = model_parallel.layout;
  r.reason = "A very large model (" + c.need_text() + "): " + model_parallel.name + " with " + std::to_string(l.tp) +
             "-way tensor parallelism within a node over fast links, " + std::to_string(l.pp) +
             " pipeline stages and " + std::to_string(l.dp) + " data-parallel replicas fits in " +
             format_gb(model_parallel.memory.total()) + " per device, " + time_text(model_parallel) +
             c.goal_text(model_parallel) + (sharding_fits ? "; faster than sharding alone." : ".");
}

// The model does not fit on one device. The notes: sharding for models that
// just miss one device (7-13B), tensor + pipeline + data parallelism for tens
// to hundreds of billions. Either gives way when the other is more than
// 1.25x faster.
bool pick_sharded_or_model_parallel(const RecommendContext& c, Recommendation& r) {
  const StrategyEstimate* sharded = lowest_fitting_zero(c.all);
  const StrategyEstimate* model_parallel =
      fastest(c.all, {StrategyKind::TensorData, StrategyKind::PipelineData, StrategyKind::TensorPipelineData});
  const bool very_large = c.in.model.parameters() >= kVeryLargeParameters;
  const bool prefer_sharded =
      sharded && (!model_parallel || (very_large ? 1.25 * sharded->step_s < model_parallel->step_s
                                                 : sharded->step_s <= 1.25 * model_parallel->step_s));
  if (prefer_sharded)
    explain_sharded(c, *sharded, r);
  else if (model_parallel)
    explain_model_parallel(c, *model_parallel, sharded != nullptr, r);
  else
    return false;
  return true;
}

// Nothing fits here: says so, and names the smallest cluster of this device
// where something would.
void explain_nothing_fits(const RecommendContext& c, Recommendation& r) {
  r.strategy.reset();
  r.has_smallest_fit = find_smallest_fit(c.in, r.smallest_fit);
  r.reason = "Does not fit anywhere on " + where(c.in) + ": one device " + c.need_text() +
             ", and no strategy brings it under " + format_gb(c.in.usable_bytes()) + ". ";
  if (r.has_smallest_fit) {
    const SmallestFit& f = r.smallest_fit;
    r.reason += "The smallest configuration that fits: " + std::to_string(f.nodes) + " node" +
                (f.nodes == 1 ? "" : "s") + " x " + std::to_string(f.devices_per_node) + " devices with " +
                f.strategy.name + " (" + format_gb(f.strategy.memory.total()) + " per device" +
                (f.strategy.recompute ? ", recomputing activations" : "") + ").";
  } else {
    r.reason += "Not even 4096 nodes of this device hold it: a device with more memory is needed.";
  }
}

}  // namespace

const StrategyEstimate* Recommendation::estimate(const std::vector<StrategyEstimate>& all) const {
  return strategy ? find(all, *strategy) : nullptr;
}

Recommendation recommend(const PlanInput& in, const std::vector<StrategyEstimate>& all) {
  Recommendation r;
  r.devices_for_target = devices_for_target(in);
  const RecommendContext c{in, all, *find(all, StrategyKind::SingleDevice), in.target_days * kDay,
                           r.devices_for_target};
  if (pick_parameter_server(c, r)) return r;
  const bool fits_one_device = c.single.fits;
  if (fits_one_device && (pick_single_device(c, r) || pick_reduction_server(c, r) || pick_data_parallel(c, r)))
    return r;
  if (pick_expert_parallel(c, r) || pick_sharded_or_model_parallel(c, r)) return r;
  explain_nothing_fits(c, r);
  return r;
}

}  // namespace meshtrain::plan
