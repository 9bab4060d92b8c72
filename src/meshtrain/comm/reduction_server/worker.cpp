#include "meshtrain/comm/reduction_server/worker.hpp"

#include <string>
#include <vector>

#include "meshtrain/comm/reduction_server/chunk_plan.hpp"
#include "meshtrain/core/error.hpp"

namespace meshtrain::comm::reduction_server {
namespace {

void send_requests(Transport& t, const Topology& topo, const Request& request) {
  std::vector<SendOp> sends;
  for (int reducer : topo.reducers) sends.push_back({reducer, &request, sizeof request});
  t.exchange(sends, {});
}

}  // namespace

void all_reduce(Transport& t, const Topology& topo, Buffer data, ReduceKind op, uint64_t sequence) {
  Request request;
  request.dtype = static_cast<uint8_t>(data.dtype);
  request.op = static_cast<uint8_t>(op);
  request.sequence = sequence;
  request.count = data.count;
  request.chunk_bytes = topo.chunk_bytes;
  if (topo.in_flight < 1 || topo.in_flight > kMaxInFlight)
    throw CommError("reduction_server: " + std::to_string(topo.in_flight) + " chunks in flight (want 1.." +
                    std::to_string(kMaxInFlight) + ")");
  request.in_flight = uint8_t(topo.in_flight);
  send_requests(t, topo, request);
  if (data.count == 0) return;

  const int R = int(topo.reducers.size());
  const size_t width = dtype_bytes(data.dtype);
  const ChunkPlan plan(data.count, R, topo.chunk_bytes, width);
  auto* bytes = static_cast<std::byte*>(data.data);
  std::vector<SendOp> sends;
  std::vector<RecvOp> recvs;
  // Iteration c sends chunk c and receives the reduced chunk c - D, so the
  // reducers' replies overlap the next chunks' upload.
  const size_t depth = request.in_flight;
  for (size_t c = 0; c < plan.max_chunks() + depth; ++c) {
    sends.clear();
    recvs.clear();
    for (int j = 0; j < R; ++j) {
      if (c < plan.chunks(j))
        sends.push_back({topo.reducers[size_t(j)], bytes + plan.chunk_begin(j, c) * width,
                         plan.chunk_elems_of(j, c) * width});
      if (c >= depth && c - depth < plan.chunks(j))
        recvs.push_back({topo.reducers[size_t(j)], bytes + plan.chunk_begin(j, c - depth) * width,
                         plan.chunk_elems_of(j, c - depth) * width, nullptr});
    }
    t.exchange(sends, recvs);
  }
}

void shutdown(Transport& t, const Topology& topo) {
  Request request;
  request.kind = RequestKind::Shutdown;
  send_requests(t, topo, request);
}

}  // namespace meshtrain::comm::reduction_server
