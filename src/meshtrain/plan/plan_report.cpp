#include "meshtrain/plan/plan_report.hpp"

#include <algorithm>
#include <cstdio>

#include "meshtrain/plan/strategies.hpp"

namespace meshtrain::plan {

Plan make_plan(const PlanInput& input) {
  input.validate();
  Plan plan{.input = input, .amount = training_amount(input)};
  plan.strategies = evaluate_strategies(input);
  plan.recommendation = recommend(input, plan.strategies);
  plan.learning_rate = large_batch_advice(input);
  return plan;
}

namespace {

std::string layout_text(const Layout& l) {
  std::string s;
  if (l.tp > 1) s += "tp" + std::to_string(l.tp) + " ";
  if (l.pp > 1) s += "pp" + std::to_string(l.pp) + " ";
  if (l.ep > 1) s += "ep" + std::to_string(l.ep) + " ";
  s += "dp" + std::to_string(l.dp);
  return s;
}

// Memory cells in GB, or MB when every strategy needs less than a GB (small
// models planned on this machine).
struct MemoryUnit {
  double scale;
  const char* name;
};

MemoryUnit memory_unit(const Plan& plan) {
  double largest = 0;
  for (const StrategyEstimate& e : plan.strategies)
    if (e.applicable) largest = std::max(largest, e.memory.total());
  return largest >= 1e9 ? MemoryUnit{1e9, "GB"} : MemoryUnit{1e6, "MB"};
}

std::string memory_cell(double bytes, MemoryUnit unit) {
  char text[16];
  std::snprintf(text, sizeof text, "%.1f", bytes / unit.scale);
  return text;
}

std::string count(double n) {
  char text[32];
  if (n >= 1e9)
    std::snprintf(text, sizeof text, "%.2f B", n / 1e9);
  else if (n >= 1e6)
    std::snprintf(text, sizeof text, "%.1f M", n / 1e6);
  else
    std::snprintf(text, sizeof text, "%.0f", n);
  return text;
}

std::string header(const Plan& plan) {
  const PlanInput& in = plan.input;
  const Cluster& c = in.cluster;
  const TrainingAmount& amount = plan.amount;
  char line[512];
  std::string out;
  std::snprintf(line, sizeof line,
                "model: %s, %s parameters (%s active), %.0f tokens per sample, %.3g FLOPs per sample\n",
                enum_string(in.model.kind).c_str(), count(in.model.parameters()).c_str(),
                count(in.model.active_parameters()).c_str(), in.model.tokens(), in.model.train_flops_per_sample(false));
  out += line;
  std::snprintf(line, sizeof line, "numbers: %s%s, optimizer %s (%.0f bytes of state per parameter)\n",
                enum_string(in.precision).c_str(), in.mixed_precision() ? " with fp32 master weights" : "",
                enum_string(in.optimizer).c_str(), in.optimizer_bytes());
  out += line;
  std::snprintf(line, sizeof line,
                "hardware: %d node%s x %d %s (%s, %.3g TFLOP/s %s), %s within a node, %s between nodes\n", c.nodes,
                c.nodes == 1 ? "" : "s", c.devices_per_node, c.device.name.c_str(),
                format_gb(c.device.memory_bytes).c_str(), in.peak_flops() / 1e12,
                in.mixed_precision() ? "16-bit" : "fp32", c.intra.name.c_str(), c.inter.name.c_str());
  out += line;
  if (amount.steps > 0)
    std::snprintf(line, sizeof line, "training: %.4g steps of %lld samples, MFU %.2f%s\n", amount.steps,
                  (long long)in.global_batch, amount.mfu,
                  amount.mfu_from_single_device ? " (from the single-device time and the token budget)" : "");
  else
    std::snprintf(line, sizeof line, "training: global batch %lld, MFU %.2f (time to train: give time.tokens or "
                  "time.single_device_days)\n", (long long)in.global_batch, amount.mfu);
  return out + line;
}

}  // namespace

std::string format_plan(const Plan& plan) {
  std::string out = header(plan) + "\n";
  char line[512];
  std::snprintf(line, sizeof line, "%-38s %-16s %7s %7s %7s %7s %7s %-5s %9s %10s %10s %12s\n", "strategy", "layout",
                "params", "grads", "optim", "activ", "total", "fits", "micro*acc", "comm/step", "step", "to train");
  out += line;
  const MemoryUnit unit = memory_unit(plan);
  std::snprintf(line, sizeof line, "%-38s %-16s %39s\n", "", "", (std::string("(") + unit.name + " per device)").c_str());
  out += line;
  for (const StrategyEstimate& e : plan.strategies) {
    if (!e.applicable) {
      std::snprintf(line, sizeof line, "%-38s %s\n", e.name.c_str(), ("- (" + e.note + ")").c_str());
      out += line;
      continue;
    }
    const std::string micro = std::to_string(e.micro_batch) + "*" + std::to_string(e.accumulation);
    std::snprintf(line, sizeof line, "%-38s %-16s %7s %7s %7s %7s %7s %-5s %9s %10s %10s %12s\n", e.name.c_str(),
                  layout_text(e.layout).c_str(), memory_cell(e.memory.parameters, unit).c_str(),
                  memory_cell(e.memory.gradients, unit).c_str(), memory_cell(e.memory.optimizer_state, unit).c_str(),
                  memory_cell(e.memory.activations, unit).c_str(), memory_cell(e.memory.total(), unit).c_str(),
                  e.fits ? (e.recompute ? "yes*" : "yes") : "no", micro.c_str(), format_gb(e.comm_bytes).c_str(),
                  format_seconds(e.step_s).c_str(), e.train_s > 0 ? format_days(e.train_s).c_str() : "-");
    out += line;
    if (!e.note.empty()) out += "    (" + e.note + ")\n";
  }
  out += "(yes*: fits with activation recomputation; micro*acc: samples per micro-batch * micro-batches per step)\n\n";
  out += "recommended: " + plan.recommendation.key() + "\n  " + plan.recommendation.reason + "\n";
  const LearningRateAdvice& lr = plan.learning_rate;
  if (lr.available) {
    std::snprintf(line, sizeof line, "learning rate: %.4g at batch %lld -> %.4g at batch %lld (x%.3g, linear rule)",
                  plan.input.base_lr, (long long)plan.input.reference_batch, lr.lr, (long long)plan.input.global_batch,
                  lr.scale);
    out += line;
    out += lr.warmup_steps > 0 ? "; warm up over " + std::to_string(lr.warmup_steps) + " steps (5 epochs)"
                               : "; warm up over the first 5 epochs (give training.samples_per_epoch for steps)";
    if (lr.suggest_layerwise) out += "; at this scale consider LAMB or LARS";
    out += "\n";
  }
  return out;
}

nlohmann::json plan_to_json(const Plan& plan) {
  const PlanInput& in = plan.input;
  const TrainingAmount& amount = plan.amount;
  nlohmann::json strategies = nlohmann::json::array();
  for (const StrategyEstimate& e : plan.strategies) {
    nlohmann::json j = {{"key", e.key()}, {"name", e.name}, {"applicable", e.applicable}, {"note", e.note}};
    if (e.applicable) {
      j["layout"] = {{"dp", e.layout.dp}, {"tp", e.layout.tp}, {"pp", e.layout.pp}, {"ep", e.layout.ep}};
      j["devices"] = e.layout.workers();
      j["memory_bytes"] = {{"parameters", e.memory.parameters}, {"gradients", e.memory.gradients},
                           {"optimizer_state", e.memory.optimizer_state}, {"activations", e.memory.activations},
                           {"total", e.memory.total()}};
      j["fits"] = e.fits;
      j["recompute"] = e.recompute;
      j["micro_batch"] = e.micro_batch;
      j["accumulation"] = e.accumulation;
      j["comm_bytes_per_step"] = e.comm_bytes;
      j["compute_s"] = e.compute_s;
      j["comm_s"] = e.comm_s;
      j["step_s"] = e.step_s;
      if (e.train_s > 0) j["train_days"] = e.train_s / 86400;
    }
    strategies.push_back(std::move(j));
  }
  const Recommendation& r = plan.recommendation;
  nlohmann::json rec = {{"key", r.key()}, {"reason", r.reason}};
  if (r.devices_for_target > 0) rec["devices_for_target"] = r.devices_for_target;
  if (r.has_smallest_fit)
    rec["smallest_fit"] = {{"devices_per_node", r.smallest_fit.devices_per_node},
                           {"nodes", r.smallest_fit.nodes},
                           {"strategy", r.smallest_fit.strategy.key()},
                           {"memory_bytes", r.smallest_fit.strategy.memory.total()}};
  nlohmann::json out = {
      {"model", {{"kind", enum_string(in.model.kind)}, {"parameters", in.model.parameters()},
                 {"active_parameters", in.model.active_parameters()}, {"tokens_per_sample", in.model.tokens()},
                 {"train_flops_per_sample", in.model.train_flops_per_sample(false)}}},
      {"precision", enum_string(in.precision)},
      {"optimizer", enum_string(in.optimizer)},
      {"optimizer_bytes_per_parameter", in.optimizer_bytes()},
      {"cluster", {{"device", in.cluster.device.name}, {"devices_per_node", in.cluster.devices_per_node},
                   {"nodes", in.cluster.nodes}, {"memory_bytes", in.cluster.device.memory_bytes},
                   {"usable_bytes", in.usable_bytes()}, {"peak_flops", in.peak_flops()},
                   {"intra_link", in.cluster.intra.name}, {"inter_link", in.cluster.inter.name}}},
      {"global_batch", in.global_batch},
      {"mfu", amount.mfu},
      {"strategies", strategies},
      {"recommendation", rec}};
  if (amount.steps > 0) out["steps"] = amount.steps;
  if (plan.learning_rate.available)
    out["learning_rate"] = {{"scaled_lr", plan.learning_rate.lr}, {"scale", plan.learning_rate.scale},
                            {"warmup_steps", plan.learning_rate.warmup_steps},
                            {"suggest_lamb_or_lars", plan.learning_rate.suggest_layerwise}};
  return out;
}

}  // namespace meshtrain::plan
