// Ring all-reduce: reduce-scatter, then all-gather, around a ring of n ranks.
//
// Terms:
//   next, prev  the ring neighbours of rank r: (r + 1) % n and (r - 1 + n) % n.
//   segment     the buffer is cut into n segments (segment_bounds); segment k
//               is finished on rank k, which is also where reduce_scatter
//               leaves rank k's result.
//   step        one of the n - 1 rounds of a phase; in each, every rank sends
//               one segment to next and receives one segment from prev.
//   chunk       a segment travels as chunks of at most chunk_bytes, all posted
//               in one exchange, so the transport reduces chunk c straight out
//               of its staging buffer while chunk c + 1 is still in flight.
//
// Per byte and step the cost is one send and one reduce-on-receive; nothing
// is copied besides what the transport itself moves.
//
// Reduce-scatter, step s = 0 .. n-2: send segment (r - s - 1), receive segment
// (r - s - 2) and reduce it into the local one (local = op(local, incoming)).
// Segment k is thus accumulated along the ring from rank k + 1 to rank k, in
// that order whatever the timing: acc = x[k+1]; acc = op(x[k+2], acc); ...;
// acc = op(x[k], acc). Rank k then holds segment k's final value (and divides
// it by n for Avg: once, on one rank).
//
// All-gather, step s = 0 .. n-2: send segment (r - s), receive segment
// (r - s - 1) by copy. Every rank ends with the bytes rank k computed for
// segment k, so all ranks are bitwise identical.
#include "meshtrain/comm/collectives/collectives.hpp"
#include "meshtrain/comm/collectives/ring.hpp"
#include "meshtrain/comm/collectives/steps.hpp"

namespace meshtrain::comm {
namespace detail {
namespace {
int wrap(int k, int n) { return ((k % n) + n) % n; }
}  // namespace

void ring_reduce_scatter(Transport& t, std::byte* data, std::span<const size_t> bounds, DataType dtype,
                         ReduceKind op, size_t chunk_bytes) {
  const int n = t.size(), r = t.rank();
  const size_t width = dtype_bytes(dtype);
  const Reduction reduction = reduction_for(op, dtype);
  const int next = wrap(r + 1, n), prev = wrap(r - 1, n);
  for (int step = 0; step < n - 1; ++step) {
    const int send_segment = wrap(r - step - 1, n);
    const int recv_segment = wrap(r - step - 2, n);
    const size_t send_begin = bounds[size_t(send_segment)], send_end = bounds[size_t(send_segment) + 1];
    const size_t recv_begin = bounds[size_t(recv_segment)], recv_end = bounds[size_t(recv_segment) + 1];
    exchange_chunked(t, next, data + send_begin * width, (send_end - send_begin) * width, prev,
                     data + recv_begin * width, (recv_end - recv_begin) * width, &reduction, chunk_bytes, width);
  }
  if (op == ReduceKind::Avg) {
    const size_t begin = bounds[size_t(r)], end = bounds[size_t(r) + 1];
    scale_average(data + begin * width, end - begin, dtype, n);
  }
}

void ring_all_gather(Transport& t, std::byte* data, std::span<const size_t> bounds, size_t width,
                     size_t chunk_bytes) {
  const int n = t.size(), r = t.rank();
  const int next = wrap(r + 1, n), prev = wrap(r - 1, n);
  for (int step = 0; step < n - 1; ++step) {
    const int send_segment = wrap(r - step, n);
    const int recv_segment = wrap(r - step - 1, n);
    const size_t send_begin = bounds[size_t(send_segment)], send_end = bounds[size_t(send_segment) + 1];
    const size_t recv_begin = bounds[size_t(recv_segment)], recv_end = bounds[size_t(recv_segment) + 1];
    exchange_chunked(t, next, data + send_begin * width, (send_end - send_begin) * width, prev,
                     data + recv_begin * width, (recv_end - recv_begin) * width, nullptr, chunk_bytes, width);
  }
}

}  // namespace detail

std::vector<size_t> segment_bounds(size_t total, int n) {
  std::vector<size_t> bounds(size_t(n) + 1, 0);
  const size_t base = total / size_t(n), extra = total % size_t(n);
  for (size_t k = 0; k < size_t(n); ++k) bounds[k + 1] = bounds[k] + base + (k < extra ? 1 : 0);
  return bounds;
}

void ring_all_reduce(Transport& t, Buffer data, ReduceKind op, const CollectiveOptions& options) {
  if (t.size() == 1) return;  // x / 1 == x: nothing to do even for Avg
  const std::vector<size_t> bounds = segment_bounds(data.count, t.size());
  auto* bytes = static_cast<std::byte*>(data.data);
  detail::ring_reduce_scatter(t, bytes, bounds, data.dtype, op, options.chunk_bytes);
  detail::ring_all_gather(t, bytes, bounds, dtype_bytes(data.dtype), options.chunk_bytes);
}

}  // namespace meshtrain::comm
