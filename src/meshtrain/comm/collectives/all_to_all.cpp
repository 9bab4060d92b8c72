// All-to-all, equal and variable splits, by pairwise exchange.
//
// Terms:
//   block  the elements rank i sends to rank j: block j of i's input, which
//          lands as block i of j's output.
//   step   s = 1 .. n-1: rank r sends its block for (r + s) % n and receives
//          the block from (r - s) % n, in one exchange (chunked), so every
//          rank has exactly one send and one receive in flight per step and
//          each pair is visited once. A rank's own block is copied locally.
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "meshtrain/comm/collectives/collectives.hpp"
#include "meshtrain/comm/collectives/steps.hpp"

namespace meshtrain::comm {
namespace {

void pairwise(Transport& t, const std::byte* in, std::span<const size_t> send_counts, std::byte* out,
              std::span<const size_t> recv_counts, size_t width, size_t chunk_bytes) {
  const int n = t.size(), r = t.rank();
  std::vector<size_t> send_offset(size_t(n) + 1, 0), recv_offset(size_t(n) + 1, 0);
  std::partial_sum(send_counts.begin(), send_counts.end(), send_offset.begin() + 1);
  std::partial_sum(recv_counts.begin(), recv_counts.end(), recv_offset.begin() + 1);
  if (recv_counts[size_t(r)] != send_counts[size_t(r)])
    detail::invalid("all_to_all_v: rank " + std::to_string(r) + " sends itself " +
                    std::to_string(send_counts[size_t(r)]) + " elements but expects " +
                    std::to_string(recv_counts[size_t(r)]));
  detail::copy_bytes(out + recv_offset[size_t(r)] * width, in + send_offset[size_t(r)] * width,
              send_counts[size_t(r)] * width);
  for (int step = 1; step < n; ++step) {
    const size_t to = size_t((r + step) % n), from = size_t((r - step + n) % n);
    detail::exchange_chunked(t, int(to), in + send_offset[to] * width, send_counts[to] * width, int(from),
                             out + recv_offset[from] * width, recv_counts[from] * width, nullptr, chunk_bytes,
                             width);
  }
}

void check_no_overlap(const char* what, ConstBuffer input, Buffer output) {
  auto* a = static_cast<const std::byte*>(input.data);
  auto* b = static_cast<const std::byte*>(output.data);
  if (input.bytes() && output.bytes() && a < b + output.bytes() && b < a + input.bytes())
    detail::invalid(std::string(what) + ": input and output overlap (in place is not supported)");
  if (input.dtype != output.dtype) detail::invalid(std::string(what) + ": input and output dtypes differ");
}

}  // namespace

void all_to_all(Transport& t, ConstBuffer input, Buffer output, const CollectiveOptions& options) {
  const size_t n = size_t(t.size());
  check_no_overlap("all_to_all", input, output);
  if (input.count != output.count || input.count % n != 0)
    detail::invalid("all_to_all: input (" + std::to_string(input.count) + ") and output (" +
                    std::to_string(output.count) + ") must hold the same multiple of " + std::to_string(n) +
                    " elements");
  const std::vector<size_t> counts(n, input.count / n);
  pairwise(t, static_cast<const std::byte*>(input.data), counts, static_cast<std::byte*>(output.data), counts,
           dtype_bytes(input.dtype), options.chunk_bytes);
}

void all_to_all_v(Transport& t, ConstBuffer input, std::span<const size_t> send_counts, Buffer output,
                  std::span<const size_t> recv_counts, const CollectiveOptions& options) {
  const size_t n = size_t(t.size());
  check_no_overlap("all_to_all_v", input, output);
  if (send_counts.size() != n || recv_counts.size() != n)
    detail::invalid("all_to_all_v: need one send and one receive count per rank (" + std::to_string(n) + ")");
  const size_t send_total = std::accumulate(send_counts.begin(), send_counts.end(), size_t{0});
  const size_t recv_total = std::accumulate(recv_counts.begin(), recv_counts.end(), size_t{0});
  if (send_total != input.count || recv_total != output.count)
    detail::invalid("all_to_all_v: counts add up to " + std::to_string(send_total) + " sent and " +
                    std::to_string(recv_total) + " received, but the buffers hold " + std::to_string(input.count) +
                    " and " + std::to_string(output.count) + " elements");
  pairwise(t, static_cast<const std::byte*>(input.data), send_counts, static_cast<std::byte*>(output.data),
           recv_counts, dtype_bytes(input.dtype), options.chunk_bytes);
}

}  // namespace meshtrain::comm
