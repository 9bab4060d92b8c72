#pragma once
// This machine as the planner sees it, measured in a few seconds: a
// "device" is one worker process on one core (what `meshtrain run` starts
// by default), its FLOP/s those of a single-threaded fp32 GEMM, its memory
// the host's shared by the cores, and the link between devices the
// shared-memory transport, whose alpha and beta come from a ring
// all-reduce over two ranks (`meshtrain bench collectives`):
//   time(B) = 2 alpha + B beta     (ring, n = 2).
#include <cstdio>
#include <string>
#include <vector>

#include "meshtrain/comm/bootstrap/transport_kind.hpp"
#include "meshtrain/comm/collectives/cost_model.hpp"
#include "meshtrain/plan/plan_keys.hpp"

namespace meshtrain::cli {

struct MachineProfile {
  int cores = 1;
  double memory_bytes = 0;     // MemTotal
  double gemm_flops = 0;       // one core, fp32
  double shm_alpha_s = 0;      // per message step
  double shm_beta_s_per_byte = 0;

  // The runtime's cost table with every all-reduce row set to the measured link.
  comm::CostTable links() const;
};

// One size of the two-rank all-reduce benchmark.
struct LinkSample {
  double bytes, seconds;
};

struct LinkFit {
  double alpha_s = 0, beta_s_per_byte = 0;
};

// Alpha from the smallest sizes, beta from the largest (medians of three;
// see the .cpp for why not least squares). Throws Error for < 2 samples.
LinkFit fit_ring_of_two(std::vector<LinkSample> samples);

// Measures, printing what it does to `log` (may be null). Throws Error when
// the collective benchmark fails.
MachineProfile measure_machine(std::FILE* log);

// The link between two ranks of this host over `transport` (Shm, as
// measure_machine, or Tcp: loopback sockets), as the runtime's cost table.
comm::CostTable measure_link(comm::TransportKind transport, std::FILE* log);

// Plan keys for a cluster of this machine's cores (hardware.device =
// custom, this machine's node size, memory, FLOP/s and shared memory).
void add_machine_profile(const MachineProfile& profile, plan::PlanValues& values);

}  // namespace meshtrain::cli
