#include "meshtrain/train/report/tensorboard/scalar_tags.hpp"

#include <array>
#include <string>
#include <string_view>

namespace meshtrain::tensorboard {
namespace {

// The job's shape, the same at every step.
constexpr std::array kJobKeys = {"batch_size",    "global_batch",      "effective_lr",    "workers",   "data_parallel",
                                 "tensor_parallel", "pipeline_parallel", "expert_parallel", "zero_stage"};
constexpr std::array kMoeKeys = {"aux_loss", "z_loss", "dropped_tokens"};

template <size_t N>
bool one_of(std::string_view key, const std::array<const char*, N>& keys) {
  for (const char* k : keys)
    if (key == k) return true;
  return false;
}

std::string trainer_tag(std::string_view key, bool run_peaks) {
  if (key.starts_with("val_")) return "val/" + std::string(key.substr(4));
  if (key.starts_with("peak_")) return (run_peaks ? "run/" : "memory/") + std::string(key);
  if (key.starts_with("comm_")) return "comm/" + std::string(key.substr(5));
  if (one_of(key, kMoeKeys)) return "moe/" + std::string(key);
  if (one_of(key, kJobKeys)) return "job/" + std::string(key);
  return "train/" + std::string(key);
}

std::string evaluator_tag(std::string_view key) {
  return "eval/" + std::string(key.starts_with("val_") ? key.substr(4) : key);
}

}  // namespace

std::optional<ScalarRecord> scalars_of_record(const nlohmann::json& record, ScalarSource source) {
  if (!record.is_object() || !record.contains("step") || !record["step"].is_number_integer()) return std::nullopt;
  ScalarRecord out;
  out.step = record["step"].get<int64_t>();
  if (record.contains("time") && record["time"].is_number()) out.wall_time = record["time"].get<double>();
  const bool run_peaks = record.contains("memory");  // the run's closing record of peaks
  for (const auto& [key, value] : record.items()) {
    if (!value.is_number() || key == "step" || key == "rank" || key == "time") continue;
    const std::string tag = source == ScalarSource::Trainer ? trainer_tag(key, run_peaks) : evaluator_tag(key);
    out.scalars.push_back({tag, static_cast<float>(value.get<double>())});
  }
  // Per-rank telemetry (rank_telemetry.hpp): "ranks/worker_<i>/<key>".
  if (record.contains("ranks") && record["ranks"].is_array())
    for (const auto& r : record["ranks"]) {
      if (!r.is_object() || !r.contains("worker") || !r["worker"].is_number_integer()) continue;
      const std::string prefix = "ranks/worker_" + std::to_string(r["worker"].get<int64_t>()) + "/";
      for (const auto& [key, value] : r.items())
        if (value.is_number() && key != "worker")
          out.scalars.push_back({prefix + key, static_cast<float>(value.get<double>())});
    }
  if (out.scalars.empty()) return std::nullopt;
  return out;
}

}  // namespace meshtrain::tensorboard
