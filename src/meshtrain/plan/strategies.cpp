#include "meshtrain/plan/strategies.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "meshtrain/plan/link_time.hpp"

namespace meshtrain::plan {

namespace {

using comm::AllReduceAlgorithm;

std::string_view strategy_name(StrategyKind kind) {
  switch (kind) {
    case StrategyKind::SingleDevice: return "one device";
    case StrategyKind::DataParallelRing: return "data parallel, ring all-reduce";
    case StrategyKind::DataParallelTree: return "data parallel, tree all-reduce";
    case StrategyKind::ReductionServer: return "data parallel + Reduction Server";
    case StrategyKind::ParameterServer: return "async parameter servers";
    case StrategyKind::Zero1: return "ZeRO-1 (optimizer state sharded)";
    case StrategyKind::Zero2: return "ZeRO-2 (+ gradients sharded)";
    case StrategyKind::Zero3: return "ZeRO-3 / FSDP (+ parameters sharded)";
    case StrategyKind::TensorData: return "tensor x data parallel";
    case StrategyKind::PipelineData: return "pipeline x data parallel";
    case StrategyKind::TensorPipelineData: return "tensor x pipeline x data parallel";
    case StrategyKind::ExpertData: return "expert x data parallel";
  }
  return "?";
}

// The tensor-parallel ways: the largest power of two within one node (and
// at most 8, where the all-reduces per layer stop paying) that divides the
// heads.
int tensor_ways(const PlanInput& in) {
  int t = 1;
  while (t * 2 <= std::min(in.cluster.devices_per_node, 8) && in.model.heads % (t * 2) == 0 &&
         in.cluster.devices() % (t * 2) == 0)
    t *= 2;
  return t;
}

// One strategy at one layout and micro-batch.
class Estimator {
 public:
  Estimator(const PlanInput& in, const TrainingAmount& amount, StrategyKind kind, Layout layout)
      : in_(in), amount_(amount), kind_(kind), layout_(layout), stage_(zero_stage(kind)) {}

  // The largest micro-batch that fits, without recomputation first.
  StrategyEstimate best() const {
    const int64_t replica = per_replica_batch();
    std::vector<int64_t> sizes;
    if (in_.micro_batch > 0)
      sizes = {std::min(in_.micro_batch, replica)};
    else if (layout_.pp > 1)
      sizes = {1};
    else
      for (int64_t b = replica;; b = (b + 1) / 2) {
        sizes.push_back(b);
        if (b == 1) break;
      }
    for (bool recompute : {false, true})
      for (int64_t b : sizes) {
        StrategyEstimate e = estimate(b, recompute);
        if (e.fits) return e;
      }
    return estimate(sizes.back(), true);
  }

 private:
  int64_t per_replica_batch() const { return (in_.global_batch + layout_.dp - 1) / layout_.dp; }

  // Parameters on one device: the dense part split by tensor and pipeline
  // ways, the experts also by expert ways.
  double device_params() const {
    const double split = double(layout_.tp) * layout_.pp;
    const double experts = in_.model.expert_parameters();
    return (in_.model.parameters() - experts) / split + experts / (split * layout_.ep);
  }

  DeviceMemory memory(int64_t b, bool recompute) const {
    const double psi = device_params(), n = layout_.dp;
    DeviceMemory m;
    m.parameters = in_.param_bytes() * psi / (stage_ >= 3 ? n : 1);
    m.gradients = in_.grad_bytes() * psi / (stage_ >= 2 ? n : 1);
    m.optimizer_state = kind_ == StrategyKind::ParameterServer ? 0 : in_.optimizer_bytes() * psi / (stage_ >= 1 ? n : 1);
    const double act = in_.model.activation_bytes(double(b), layout_.tp, recompute, in_.activation_bytes());
    // 1F1B: the first stage holds min(p, m) micro-batches of its L/p layers.
    const double in_flight = std::min<double>(layout_.pp, double(accumulation(b)));
    m.activations = act / layout_.pp * std::max(1.0, in_flight);
    return m;
  }

  int64_t accumulation(int64_t b) const { return (per_replica_batch() + b - 1) / b; }

  bool dp_crosses_nodes() const { return layout_.tp * layout_.dp > in_.cluster.devices_per_node; }
  // A data-parallel group's devices on one node (tensor ways are inner).
  int dp_members_per_node() const {
    return std::max(1, std::min(layout_.dp, in_.cluster.devices_per_node / layout_.tp));
  }

  // The gradient exchange's time (all of it) and bytes sent, per step.
  struct Exchange {
    double during_backward_s = 0, after_s = 0, bytes = 0;
  };

  Exchange gradient_exchange(int64_t micro_batches) const {
    const double psi = device_params(), experts = in_.model.expert_parameters() / (layout_.tp * layout_.pp);
    const double dense_grads = in_.grad_bytes() * (psi - experts / layout_.ep);
    const double expert_grads = in_.grad_bytes() * experts / layout_.ep;
    const int n = layout_.dp, expert_n = std::max(1, layout_.dp / layout_.ep);
    const LinkCost link = link_cost(in_.cluster, dp_crosses_nodes(), dp_members_per_node());
    Exchange x;
    switch (kind_) {
      case StrategyKind::ParameterServer: {
        // Push the gradients, pull the parameters, to servers on the network.
        const LinkCost net = link_cost(in_.cluster, true);
        x.after_s = 2 * send_s(net, dense_grads + expert_grads);
        x.bytes = dense_grads + expert_grads;
        return x;
      }
      case StrategyKind::Zero1:
        x.during_backward_s = all_reduce_s(link, AllReduceAlgorithm::Ring, dense_grads, n);
        x.after_s = all_gather_s(link, in_.param_bytes() * psi, n);
        x.bytes = all_reduce_bytes_sent(AllReduceAlgorithm::Ring, dense_grads, n) +
                  all_gather_bytes_sent(in_.param_bytes() * psi, n);
        return x;
      case StrategyKind::Zero2:
        x.during_backward_s = double(micro_batches) * all_gather_s(link, dense_grads, n);
        x.after_s = all_gather_s(link, in_.param_bytes() * psi, n);
        x.bytes = double(micro_batches) * all_gather_bytes_sent(dense_grads, n) +
                  all_gather_bytes_sent(in_.param_bytes() * psi, n);
        return x;
      case StrategyKind::Zero3: {
        // Per micro-batch: gather for forward, gather again and
        // reduce-scatter for backward.
        const double gather = all_gather_s(link, in_.param_bytes() * psi, n);
        x.during_backward_s = double(micro_batches) * (2 * gather + all_gather_s(link, dense_grads, n));
        x.bytes = double(micro_batches) * (2 * all_gather_bytes_sent(in_.param_bytes() * psi, n) +
                                           all_gather_bytes_sent(dense_grads, n));
        return x;
      }
      default: break;
    }
    const AllReduceAlgorithm algorithm = kind_ == StrategyKind::DataParallelTree  ? AllReduceAlgorithm::Tree
                                         : kind_ == StrategyKind::ReductionServer ? AllReduceAlgorithm::ReductionServer
                                                                                  : AllReduceAlgorithm::Ring;
    // The Reduction Server's reducers sit on the network, even for one node;
    // too few of them make their links the bottleneck.
    LinkCost ar_link = link;
    if (kind_ == StrategyKind::ReductionServer) {
      ar_link = link_cost(in_.cluster, true, dp_members_per_node());
      ar_link.beta_s_per_byte *= reducer_slowdown(in_.cluster);
    }
    const LinkCost expert_link = link_cost(in_.cluster, layout_.tp * expert_n > in_.cluster.devices_per_node);
    x.during_backward_s = all_reduce_s(ar_link, algorithm, dense_grads, n) +
                          all_reduce_s(expert_link, algorithm, expert_grads, expert_n);
    x.bytes = all_reduce_bytes_sent(algorithm, dense_grads, n) + all_reduce_bytes_sent(algorithm, expert_grads, expert_n);
    return x;
  }

  // Model-parallel traffic per step that nothing hides: tensor-parallel
  // all-reduces (2 per layer forward, 2 backward, 2 more to recompute),
  // pipeline sends, expert all-to-alls (as many as the all-reduces).
  double model_parallel_s(int64_t b, int64_t micro_batches, bool recompute, double& bytes) const {
    const double act = in_.model.layer_output_bytes(double(b), in_.activation_bytes());
    const double layers = double(in_.model.layers) / layout_.pp;
    const double per_layer = recompute ? 6 : 4;
    double s = 0;
    if (layout_.tp > 1) {
      const LinkCost link = link_cost(in_.cluster, layout_.tp > in_.cluster.devices_per_node);
      s += micro_batches * layers * per_layer * all_reduce_s(link, AllReduceAlgorithm::Ring, act, layout_.tp);
      bytes += micro_batches * layers * per_layer * all_reduce_bytes_sent(AllReduceAlgorithm::Ring, act, layout_.tp);
    }
    if (layout_.pp > 1) {
      const LinkCost link = link_cost(in_.cluster, in_.cluster.nodes > 1);
      s += 2.0 * micro_batches * send_s(link, act / layout_.tp);
      bytes += 2.0 * micro_batches * act / layout_.tp;
    }
    if (layout_.ep > 1) {
      const double routed = act * double(in_.model.top_k) / layout_.tp;
      const LinkCost link = link_cost(in_.cluster, layout_.ep > in_.cluster.devices_per_node);
      s += micro_batches * layers * per_layer * all_to_all_s(link, routed, layout_.ep);
      bytes += micro_batches * layers * per_layer * all_gather_bytes_sent(routed, layout_.ep);
    }
    return s;
  }

  StrategyEstimate estimate(int64_t b, bool recompute) const {
    StrategyEstimate e;
    e.kind = kind_;
    e.name = strategy_name(kind_);
    e.layout = layout_;
    e.micro_batch = b;
    e.accumulation = accumulation(b);
    e.recompute = recompute;
    e.memory = memory(b, recompute);
    e.fits = e.memory.total() <= in_.usable_bytes();

    const double flops = double(in_.global_batch) * in_.model.train_flops_per_sample(recompute);
    e.compute_s = flops / (double(layout_.workers()) * in_.peak_flops() * amount_.mfu);
    if (layout_.pp > 1) {
      const double p = layout_.pp, m = double(e.accumulation);
      e.compute_s /= 1 - (p - 1) / (m + p - 1);
    }
    const Exchange x = gradient_exchange(e.accumulation);
    // The exchange overlaps the backward of the last micro-batch (ZeRO-2
    // and 3 that of every one); backward is 2/3 of the work (3/4 recomputing).
    // ZeRO-3 prefetches its gathers behind forward as well.
    const double share = stage_ >= 3 ? 1.0 : recompute ? 0.75 : 2.0 / 3.0;
    const int64_t overlapped = stage_ >= 2 ? e.accumulation : 1;
    const double window = e.compute_s * share * double(overlapped) / double(e.accumulation);
    const double hidden = in_.overlap * std::min(x.during_backward_s, window);
    e.comm_bytes = x.bytes;
    e.comm_exchange_s = x.during_backward_s + x.after_s;
    e.comm_s = x.during_backward_s - hidden + x.after_s + model_parallel_s(b, e.accumulation, recompute, e.comm_bytes);
    e.step_s = e.compute_s + e.comm_s;
    e.train_s = amount_.steps * e.step_s;
    if (kind_ == StrategyKind::ReductionServer && reducer_slowdown(in_.cluster) > 1) {
      char note[160];
      std::snprintf(note, sizeof note,
                    "%d reducers: their links bound it, %.2fx slower than with enough (total reducer bandwidth "
                    ">= the workers')",
                    in_.cluster.reducers, reducer_slowdown(in_.cluster));
      e.note = note;
    }
    return e;
  }

  const PlanInput& in_;
  const TrainingAmount& amount_;
  StrategyKind kind_;
  Layout layout_;
  int stage_;
};

}  // namespace

double reducer_slowdown(const Cluster& c) {
  if (c.reducers <= 0) return 1;  // sized by Vertex's rule: the reducers' links match the workers'
  const double reducer_link = c.reducer_bandwidth_Bps > 0 ? c.reducer_bandwidth_Bps : c.inter.bandwidth_Bps;
  // Workers' nodes send N x B in all (B per device, at the node's rate),
  // the reducers take it in at R x their link.
  return std::max(1.0, c.nodes * c.inter.bandwidth_Bps / (c.reducers * reducer_link));
}

namespace {

std::vector<int> divisors(int n) {
  std::vector<int> d;
  for (int k = 1; k <= n; ++k)
    if (n % k == 0) d.push_back(k);
  return d;
}

// Pipeline depth: the fewest stages (>= 2, at most one layer each) that fit.
StrategyEstimate with_fewest_stages(const PlanInput& in, const TrainingAmount& amount, StrategyKind kind, int tp) {
  StrategyEstimate last;
  bool any = false;
  for (int p : divisors(in.cluster.devices() / tp)) {
    if (p < 2 || p > in.model.layers) continue;
    last = Estimator(in, amount, kind, {.dp = in.cluster.devices() / (tp * p), .tp = tp, .pp = p}).best();
    any = true;
    if (last.fits) return last;
  }
  if (!any) {
    last.kind = kind;
    last.name = strategy_name(kind);
    last.applicable = false;
    last.note = "no pipeline depth between 2 and the layers divides the devices";
  }
  return last;
}

StrategyEstimate not_applicable(StrategyKind kind, std::string why) {
  StrategyEstimate e;
  e.kind = kind;
  e.name = strategy_name(kind);
  e.applicable = false;
  e.note = std::move(why);
  return e;
}

}  // namespace

TrainingAmount training_amount(const PlanInput& in) {
  TrainingAmount a;
  a.mfu = in.mfu;
  const double flops_per_sample = in.model.train_flops_per_sample(false);
  if (in.tokens > 0) a.samples = in.tokens / in.model.tokens();
  if (in.single_device_days > 0) {
    const double device_flops = in.single_device_days * 86400 * in.peak_flops();
    if (a.samples > 0) {
      a.mfu = a.samples * flops_per_sample / device_flops;
      a.mfu_from_single_device = true;
    } else {
      a.samples = device_flops * a.mfu / flops_per_sample;
    }
  }
  a.steps = a.samples / double(in.global_batch);
  return a;
}

StrategyEstimate evaluate_strategy(const PlanInput& in, StrategyKind kind) {
  const TrainingAmount amount = training_amount(in);
  const int n = in.cluster.devices();
  const bool shaped = in.model.has_shape();
  switch (kind) {
    case StrategyKind::SingleDevice: {
      PlanInput one = in;
      one.cluster.nodes = one.cluster.devices_per_node = 1;
      return Estimator(one, amount, kind, {}).best();
    }
    case StrategyKind::ReductionServer:
      if (in.cluster.nodes < 2) return not_applicable(kind, "for data parallelism across nodes");
      [[fallthrough]];
    case StrategyKind::DataParallelRing:
    case StrategyKind::DataParallelTree:
    case StrategyKind::ParameterServer:
    case StrategyKind::Zero1:
    case StrategyKind::Zero2:
    case StrategyKind::Zero3:
      if (n < 2) return not_applicable(kind, "needs 2 or more devices");
      return Estimator(in, amount, kind, {.dp = n}).best();
    case StrategyKind::TensorData: {
      if (!shaped) return not_applicable(kind, "needs the model's shape (layers, hidden, heads)");
      const int t = tensor_ways(in);
      if (t < 2) return not_applicable(kind, "no 2+ devices in a node that divide the heads");
      return Estimator(in, amount, kind, {.dp = n / t, .tp = t}).best();
    }
    case StrategyKind::PipelineData:
      if (!shaped) return not_applicable(kind, "needs the model's shape (layers, hidden, heads)");
      return with_fewest_stages(in, amount, kind, 1);
    case StrategyKind::TensorPipelineData: {
      if (!shaped) return not_applicable(kind, "needs the model's shape (layers, hidden, heads)");
      const int t = tensor_ways(in);
      if (t < 2) return not_applicable(kind, "no 2+ devices in a node that divide the heads");
      return with_fewest_stages(in, amount, kind, t);
    }
    case StrategyKind::ExpertData: {
      if (!in.model.is_moe()) return not_applicable(kind, "for mixture-of-experts models");
      const int ep = std::gcd(int(in.model.experts), n);
      if (ep < 2) return not_applicable(kind, "the experts and the devices share no factor");
      return Estimator(in, amount, kind, {.dp = n, .ep = ep}).best();
    }
  }
  return not_applicable(kind, "unknown strategy");
}

std::vector<StrategyEstimate> evaluate_strategies(const PlanInput& in) {
  std::vector<StrategyEstimate> all;
  for (int k = 0; k <= int(StrategyKind::ExpertData); ++k) {
    const auto kind = static_cast<StrategyKind>(k);
    if (kind == StrategyKind::ExpertData && !in.model.is_moe()) continue;
    all.push_back(evaluate_strategy(in, kind));
  }
  return all;
}

}  // namespace meshtrain::plan
