#include "meshtrain/plan/link_time.hpp"

#include <algorithm>
#include <bit>

#include "meshtrain/comm/collectives/cost_model.hpp"

namespace meshtrain::plan {

LinkCost link_cost(const Cluster& cluster, bool crosses_nodes, int members_per_node) {
  const LinkProfile& link = crosses_nodes ? cluster.inter : cluster.intra;
  const int sharing = std::max(1, cluster.devices_per_node / std::max(1, members_per_node));
  const double bandwidth = link.per_node ? link.bandwidth_Bps / sharing : link.bandwidth_Bps;
  return {link.latency_s, 1.0 / bandwidth};
}

namespace {

comm::CostTable table_for(LinkCost link) { return comm::CostTable::on_one_link(link.alpha_s, link.beta_s_per_byte); }

}  // namespace

double all_reduce_s(LinkCost link, comm::AllReduceAlgorithm algorithm, double bytes, int ranks) {
  if (ranks <= 1 || bytes <= 0) return 0;
  return comm::all_reduce_seconds(table_for(link), algorithm, size_t(bytes), ranks);
}

double all_gather_s(LinkCost link, double bytes, int ranks) {
  if (ranks <= 1 || bytes <= 0) return 0;
  return comm::all_gather_seconds(table_for(link), size_t(bytes), ranks);
}

double all_to_all_s(LinkCost link, double bytes_per_device, int ranks) { return all_gather_s(link, bytes_per_device, ranks); }

double send_s(LinkCost link, double bytes) { return bytes > 0 ? link.alpha_s + bytes * link.beta_s_per_byte : 0; }

double all_reduce_bytes_sent(comm::AllReduceAlgorithm algorithm, double bytes, int ranks) {
  if (ranks <= 1) return 0;
  if (algorithm == comm::AllReduceAlgorithm::ReductionServer) return bytes;
  if (algorithm == comm::AllReduceAlgorithm::RecursiveDoubling) {
    const unsigned p = std::bit_floor(unsigned(ranks));
    return (std::countr_zero(p) + (p != unsigned(ranks) ? 1 : 0)) * bytes;
  }
  return 2 * all_gather_bytes_sent(bytes, ranks);
}

double all_gather_bytes_sent(double bytes, int ranks) { return ranks <= 1 ? 0 : double(ranks - 1) / ranks * bytes; }

}  // namespace meshtrain::plan
