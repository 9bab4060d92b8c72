#pragma once
// Communication times with the alpha-beta model: alpha the link's latency
// per message step, beta its seconds per byte per device. All-reduce uses
// the runtime's own cost formulas (comm/collectives/cost_model.hpp), so the
// planner and AllReduceAlgorithm::Auto agree; the other collectives are the
// ring's halves:
//   all-gather / reduce-scatter of B bytes in all   (n-1) alpha + (n-1)/n B beta
//   all-to-all, B bytes per device                  (n-1) alpha + (n-1)/n B beta
//   send B bytes to a neighbour                     alpha + B beta
// A network between nodes shares its bandwidth among the groups that use it
// at once: a ring that spans nodes crosses each node's network link once
// (NCCL's rings; with one NIC per GPU, one ring per NIC), so a group with
// k members on each node gets k / devices_per_node of the node's bandwidth,
// and a collective that every device runs on its own (all-to-all, pipeline
// sends, parameter-server pushes) 1 / devices_per_node each.
#include "meshtrain/comm/collectives/algorithm.hpp"
#include "meshtrain/plan/plan_input.hpp"

namespace meshtrain::plan {

struct LinkCost {
  double alpha_s = 0;
  double beta_s_per_byte = 0;
};

// The link a group of devices talks over: the node's own when the group
// stays within a node, the network otherwise, shared as above by a group
// with `members_per_node` of its devices on each node.
LinkCost link_cost(const Cluster& cluster, bool crosses_nodes, int members_per_node = 1);

double all_reduce_s(LinkCost link, comm::AllReduceAlgorithm algorithm, double bytes, int ranks);
double all_gather_s(LinkCost link, double bytes, int ranks);  // also reduce-scatter
double all_to_all_s(LinkCost link, double bytes_per_device, int ranks);
double send_s(LinkCost link, double bytes);

// Bytes one device sends in each (ring algorithms; the Reduction Server
// sends its B once and receives the sum).
double all_reduce_bytes_sent(comm::AllReduceAlgorithm algorithm, double bytes, int ranks);
double all_gather_bytes_sent(double bytes, int ranks);

}  // namespace meshtrain::plan
