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
         std::to_string(r.chunk_bytes) + " bytes, request " + std::to_string(r.sequence);
}

namespace {

bool same(const Request& a, const Request& b) {
  return a.kind == b.kind && a.dtype == b.dtype && a.op == b.op && a.sequence == b.sequence && a.count == b.count &&
         a.chunk_bytes == b.chunk_bytes;
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
        r.dtype > uint8_t(DataType::I64) || r.op > uint8_t(ReduceKind::Min) || (r.chunk_bytes == 0 && r.count > 0))
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
  // staging[parity][w]: chunk from worker w; acc[parity]: its reduction.
  // Two parities so chunk c arrives while chunk c - 1 is being returned.
  std::vector<std::byte> staging[2], acc[2];
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
    for (int p = 0; p < 2; ++p) {
      if (staging[p].size() < n * max_bytes) staging[p].resize(n * max_bytes);
      if (acc[p].size() < max_bytes) acc[p].resize(max_bytes);
    }
    const Reduction reduction = detail::reduction_for(op, dtype);
    std::vector<RecvOp> recvs;
    std::vector<SendOp> sends;
    for (size_t c = 0; c <= chunks; ++c) {
      recvs.clear();
      sends.clear();
      const size_t p = c % 2;
      const size_t bytes_now = c < chunks ? plan.chunk_elems_of(j, c) * width : 0;
      if (c < chunks)
        for (size_t w = 0; w < n; ++w)
          recvs.push_back({topo.workers[w], staging[p].data() + w * max_bytes, bytes_now, nullptr});
      if (c >= 1) {
        const size_t bytes_prev = plan.chunk_elems_of(j, c - 1) * width;
        for (size_t w = 0; w < n; ++w) sends.push_back({topo.workers[w], acc[1 - p].data(), bytes_prev});
      }
      t.exchange(sends, recvs);
      if (c < chunks) {
        // Worker order, whatever the arrival order: deterministic sums.
        std::memcpy(acc[p].data(), staging[p].data(), bytes_now);
        for (size_t w = 1; w < n; ++w) reduce_into(acc[p].data(), staging[p].data() + w * max_bytes, bytes_now, reduction);
        if (op == ReduceKind::Avg) detail::scale_average(acc[p].data(), bytes_now / width, dtype, int(n));
        stats.bytes_in += bytes_now * n;
      }
    }
  }
}

}  // namespace meshtrain::comm::reduction_server
