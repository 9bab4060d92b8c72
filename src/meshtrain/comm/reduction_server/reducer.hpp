#pragma once
// The reducer role (`meshtrain reducer`): no model, no accelerator. It serves
// all-reduce requests for its segment until every worker has shut down.
#include <cstdint>
#include <functional>

#include "meshtrain/comm/reduction_server/protocol.hpp"
#include "meshtrain/comm/transport/transport.hpp"

namespace meshtrain::comm::reduction_server {

struct ReducerStats {
  uint64_t requests = 0;  // all-reduces served
  uint64_t bytes_in = 0;  // payload received from all workers
};

// Serves until all workers send Shutdown. Throws CommError when a worker
// dies or times out, or when workers disagree on a request.
ReducerStats serve(Transport& transport, const Topology& topology);

}  // namespace meshtrain::comm::reduction_server
