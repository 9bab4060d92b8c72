#pragma once
// The worker side of the Reduction Server: one more all-reduce algorithm.
#include <cstdint>

#include "meshtrain/comm/collectives/buffer.hpp"
#include "meshtrain/comm/reduction_server/protocol.hpp"
#include "meshtrain/comm/transport/transport.hpp"

namespace meshtrain::comm::reduction_server {

// All-reduces `data` across topology.workers through topology.reducers.
// `transport` is the world transport (it reaches the reducers); `sequence`
// counts this worker's all-reduces (the reducers check it).
void all_reduce(Transport& transport, const Topology& topology, Buffer data, ReduceKind op, uint64_t sequence);

// Tells every reducer this worker is done (each reducer exits when all
// workers have said so).
void shutdown(Transport& transport, const Topology& topology);

}  // namespace meshtrain::comm::reduction_server
