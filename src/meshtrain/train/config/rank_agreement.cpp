#include "meshtrain/train/config/rank_agreement.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <sstream>

#include "meshtrain/core/error.hpp"
#include "meshtrain/train/config/config_schema.hpp"

namespace meshtrain {
namespace {

// May differ between hosts without changing what the job computes.
constexpr std::array kPerHost = {
    "data.path",          "data.train_path",      "data.val_path",       "data.tokenizer",
    "training.out_dir",   "training.threads",     "training.log_every",
    "checkpoint.dir",     "checkpoint.keep",      "checkpoint.async",    "metrics.path",
    "metrics.tensorboard", "metrics.prometheus_port", "metrics.prometheus_address",
    "parallel.transport", "parallel.timeout_s",   "parallel.workers",    "parallel.reducers",
    "parallel.servers",   "parallel.evaluators",  "parallel.max_restarts", "parallel.restart_backoff_s",
    "parallel.heartbeat_timeout_s", "parallel.stop_grace_s"};

int64_t fnv1a(const std::string& text) {
  uint64_t h = 14695981039346656037ull;
  for (char c : text) {
    h ^= static_cast<uint8_t>(c);
    h *= 1099511628211ull;
  }
  return static_cast<int64_t>(h);
}

}  // namespace

SharedSettings shared_settings(const JobConfig& config) {
  SharedSettings out;
  std::istringstream toml(job_config_to_toml(config));
  std::string line, section;
  while (std::getline(toml, line)) {
    if (line.starts_with('[') && line.ends_with(']')) {
      section = line.substr(1, line.size() - 2);
      continue;
    }
    const size_t eq = line.find(" = ");
    if (eq == std::string::npos) continue;
    std::string key = section + "." + line.substr(0, eq);
    if (std::find(kPerHost.begin(), kPerHost.end(), key) != kPerHost.end()) continue;
    out.emplace_back(std::move(key), line.substr(eq + 3));
  }
  return out;
}

void check_ranks_agree(const SharedSettings& settings, comm::ProcessGroup& workers) {
  const int n = workers.size();
  // First the number of settings: ranks built from different versions may
  // not even have the same keys, and the next exchange needs equal sizes.
  std::vector<int64_t> count{static_cast<int64_t>(settings.size())}, counts(static_cast<size_t>(n));
  workers.all_gather(count, counts);
  if (std::adjacent_find(counts.begin(), counts.end(), std::not_equal_to<>()) != counts.end())
    throw ConfigError("the workers run different meshtrain builds: their job configs have different keys (this "
                      "rank, " + std::to_string(workers.rank()) + ", has " + std::to_string(settings.size()) + ")");
  std::vector<int64_t> mine, all(settings.size() * static_cast<size_t>(n));
  for (const auto& [key, value] : settings) mine.push_back(fnv1a(key + "=" + value));
  workers.all_gather(mine, all);
  std::string differ;
  for (size_t k = 0; k < settings.size(); ++k) {
    std::string others;
    for (int r = 0; r < n; ++r)
      if (all[static_cast<size_t>(r) * settings.size() + k] != mine[k])
        others += (others.empty() ? "" : ", ") + std::to_string(r);
    if (!others.empty())
      differ += "\n  " + settings[k].first + " = " + settings[k].second + " here, another value on rank " + others;
  }
  if (!differ.empty())
    throw ConfigError("the workers disagree on the job (rank " + std::to_string(workers.rank()) + " of " +
                      std::to_string(n) + "); start every worker with the same config and overrides:" + differ);
}

}  // namespace meshtrain
