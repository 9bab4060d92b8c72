#include "meshtrain/plan/link_time.hpp"

#include <algorithm>

#include "meshtrain/comm/collectives/cost_model.hpp"

namespace meshtrain::plan {

LinkCost link_cost(const Cluster& cluster, bool crosses_nodes) {
  const LinkProfile& link = crosses_nodes ? cluster.inter : cluster.intra;
  const double per_device = link.per_node ? link.bandwidth_Bps / cluster.devices_per_node : link.bandwidth_Bps;
  return {link.latency_s, 1.0 / per_device};
}

double all_reduce_s(LinkCost link, comm::AllReduceAlgorithm algorithm, double bytes, int ranks) {
  if (ranks <= 1 || bytes <= 0) return 0;
  comm::CostTable table;
  for (comm::AlgorithmCost& row : table.all_reduce) row.alpha_s = link.alpha_s, row.beta_s_per_byte = link.beta_s_per_byte;
  return comm::all_reduce_seconds(table, algorithm, size_t(bytes), ranks);
}

double all_gather_s(LinkCost link, double bytes, int ranks) {
  if (ranks <= 1 || bytes <= 0) return 0;
  return (ranks - 1) * link.alpha_s + double(ranks - 1) / ranks * bytes * link.beta_s_per_byte;
}

double all_to_all_s(LinkCost link, double bytes_per_device, int ranks) { return all_gather_s(link, bytes_per_device, ranks); }

double send_s(LinkCost link, double bytes) { return bytes > 0 ? link.alpha_s + bytes * link.beta_s_per_byte : 0; }

double all_reduce_bytes_sent(comm::AllReduceAlgorithm algorithm, double bytes, int ranks) {
  if (ranks <= 1) return 0;
  if (algorithm == comm::AllReduceAlgorithm::ReductionServer) return bytes;
  return 2 * all_gather_bytes_sent(bytes, ranks);
}

double all_gather_bytes_sent(double bytes, int ranks) { return ranks <= 1 ? 0 : double(ranks - 1) / ranks * bytes; }

}  // namespace meshtrain::plan
