#include "meshtrain/comm/reduction_server/reducer.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

#include "meshtrain/comm/collectives/steps.hpp"
#include "meshtrain/comm/reduction_server/chunk_plan.hpp"
#include "meshtrain/core/error.hpp"

namespace meshtrain::comm::reduction_server {

std::string describe(const Request& r) {
  if (r.kind == RequestKind::Shutdown) return "shutdown";
  return std::to_string(r.count) + " " + std::string(dtype_name(static_cast<DataType>(r.dtype))) + " elements, " +
         std::string(reduce_kind_name(static_cast<ReduceKind>(r.op))) + ", chunks of " +
         std::to_string(r.chunk_bytes) + " bytes, " + std::to_string(r.in_flight) + " in flight, request " +
         std::to_string(r.sequence);
}

namespace {

bool same(const Request& a, const Request& b) {
  return a.kind == b.kind && a.dtype == b.dtype && a.op == b.op && a.sequence == b.sequence && a.count == b.count &&
         a.chunk_bytes == b.chunk_bytes && a.in_flight == b.in_flight;
}

// Receives one request from every worker and checks that they agree.
std::vector<Request> receive_requests(Transport& t, const Topology& topo) {
  const size_t n = topo.workers.size();
  std::vector<Request> requests(n);
  std::vector<RecvOp> recvs;
  for (size_t w = 0; w < n; ++w) recvs.push_back({topo.workers[w], &requests[w], sizeof(Request), nullptr});
  t.exchange({}, recvs);
  for (size_t w = 0; w < n; ++w) {
    const Request& r = requests[w];
    if (r.magic != kRequestMagic || (r.kind != RequestKind::AllReduce && r.kind != RequestKind::Shutdown) ||
        r.dtype > uint8_t(DataType::BF16) || r.op > uint8_t(ReduceKind::Min) || (r.chunk_bytes == 0 && r.count > 0) ||
        (r.kind == RequestKind::AllReduce && (r.in_flight < 1 || r.in_flight > kMaxInFlight)))
      throw CommError("reducer rank " + std::to_string(t.rank()) + ": malformed request from worker rank " +
                      std::to_string(topo.workers[w]));
    if (!same(r, requests[0]))
      throw CommError("reducer rank " + std::to_string(t.rank()) + ": workers disagree: worker rank " +
                      std::to_string(topo.workers[0]) + " asks " + describe(requests[0]) + ", worker rank " +
                      std::to_string(topo.workers[w]) + " asks " + describe(r));
  }
  return requests;
}

}  // namespace

ReducerStats serve(Transport& t, const Topology& topo) {
  const auto me = std::find(topo.reducers.begin(), topo.reducers.end(), t.rank());
  if (me == topo.reducers.end())
    throw CommError("rank " + std::to_string(t.rank()) + " is not one of the reducers");
  const int j = int(me - topo.reducers.begin());
  const size_t n = topo.workers.size();
  // staging[w]: the chunk arriving from worker w, summed right after the
  // exchange; acc[c % (D + 1)]: the sum of chunk c, kept until exchange
  // c + D returns it (D + 1 slots: D sums waiting and the one being made).
  std::vector<std::byte> staging;
  std::vector<std::vector<std::byte>> acc;
  ReducerStats stats;
  for (;;) {
    const Request request = receive_requests(t, topo)[0];
    if (request.kind == RequestKind::Shutdown) return stats;
    ++stats.requests;
    if (request.count == 0) continue;
    const auto dtype = static_cast<DataType>(request.dtype);
    const auto op = static_cast<ReduceKind>(request.op);
    const size_t width = dtype_bytes(dtype);
    const ChunkPlan plan(request.count, int(topo.reducers.size()), request.chunk_bytes, width);
    const size_t chunks = plan.chunks(j);
    const size_t max_bytes = plan.chunk_elems * width;
    const size_t depth = request.in_flight, slots = depth + 1;
    if (staging.size() < n * max_bytes) staging.resize(n * max_bytes);
    if (acc.size() < slots) acc.resize(slots);
    for (auto& slot : acc)
      if (slot.size() < max_bytes) slot.resize(max_bytes);
    const Reduction reduction = detail::reduction_for(op, dtype);
    std::vector<RecvOp> recvs;
    std::vector<SendOp> sends;
    for (size_t c = 0; c < chunks + depth; ++c) {
      recvs.clear();
      sends.clear();
      const size_t bytes_now = c < chunks ? plan.chunk_elems_of(j, c) * width : 0;
      if (c < chunks)
        for (size_t w = 0; w < n; ++w)
          recvs.push_back({topo.workers[w], staging.data() + w * max_bytes, bytes_now, nullptr});
      if (c >= depth && c - depth < chunks) {
        const size_t bytes_back = plan.chunk_elems_of(j, c - depth) * width;
        for (size_t w = 0; w < n; ++w) sends.push_back({topo.workers[w], acc[(c - depth) % slots].data(), bytes_back});
      }
      t.exchange(sends, recvs);
      if (c < chunks) {
        // Worker order, whatever the arrival order: deterministic sums.
        std::byte* sum = acc[c % slots].data();
        std::memcpy(sum, staging.data(), bytes_now);
        for (size_t w = 1; w < n; ++w) reduce_into(sum, staging.data() + w * max_bytes, bytes_now, reduction);
        if (op == ReduceKind::Avg) detail::scale_average(sum, bytes_now / width, dtype, int(n));
        stats.bytes_in += bytes_now * n;
      }
    }
  }
}

}  // namespace meshtrain::comm::reduction_server
