#include "meshtrain/train/forecast/job_links.hpp"

#include <algorithm>

#include "meshtrain/core/error.hpp"

namespace meshtrain {

JobLinks::JobLinks(const HostLayout& hosts, int workers, std::function<comm::CostTable()> intra)
    : hosts_(hosts), per_host_(workers), measure_(std::move(intra)) {
  if (hosts_.hosts < 1) throw ConfigError("hardware.nodes: at least 1 host");
  if (hosts_.hosts == 1) return;
  if (workers % hosts_.hosts != 0)
    throw ConfigError("hardware.nodes = " + std::to_string(hosts_.hosts) + ": the job's " + std::to_string(workers) +
                      " workers do not split evenly over the hosts");
  if (hosts_.inter_bytes_per_s <= 0)
    throw ConfigError("hardware.nodes = " + std::to_string(hosts_.hosts) +
                      ": give the hosts' network link (hardware.inter_gb_per_s or hardware.inter_link)");
  per_host_ = workers / hosts_.hosts;
}

const comm::CostTable& JobLinks::intra() {
  if (!measured_) intra_ = measure_(), measured_ = true;
  return intra_;
}

comm::CostTable JobLinks::group(const char* name, int stride, int members, bool every_rank) {
  if (members <= 1 || hosts_.hosts == 1 || stride * (members - 1) < per_host_) return intra();
  if (std::find(crossing_.begin(), crossing_.end(), name) == crossing_.end()) crossing_.push_back(name);
  const int members_per_host = every_rank ? 1 : std::clamp(per_host_ / stride, 1, members);
  const double sharing = std::max(1, per_host_ / members_per_host);
  const double alpha = hosts_.inter_latency_s > 0 ? hosts_.inter_latency_s
                                                  : intra().row(comm::AllReduceAlgorithm::Ring).alpha_s;
  return comm::CostTable::on_one_link(alpha, sharing / hosts_.inter_bytes_per_s);
}

comm::CostTable JobLinks::group(const char* name, std::span<const int> ranks, bool every_rank) {
  const int stride = ranks.size() > 1 ? ranks[1] - ranks[0] : 1;
  return group(name, stride, static_cast<int>(ranks.size()), every_rank);
}

}  // namespace meshtrain
