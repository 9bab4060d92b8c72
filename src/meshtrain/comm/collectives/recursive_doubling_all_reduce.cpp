// Recursive doubling all-reduce: log2(p) steps, each an exchange of the whole
// buffer with one peer, for p a power of two. The latency algorithm: a 2-rank
// all-reduce is one round trip (a ring or halving-doubling needs two), at the
// price of moving log2(p) whole buffers, so Auto picks it for small messages.
//
// Terms:
//   p, extra, fold  detail::PowerOfTwoFold (steps.hpp): the extra = n - p
//             ranks hand their buffers to a neighbour first and get the
//             result back last
//   distance  d = 1, 2, ..., p/2; the peer at a step is newrank XOR d
//   step      send the whole buffer to the peer, receive the peer's into a
//             scratch buffer, then combine as op(lower, higher): the partial
//             result of the lower new rank is always the left operand
//             (reduce_into_after when this rank is the higher one).
//
// Both peers of a step hold the same partial results, and with the operands
// in a fixed order they compute the same bits even where op(a, b) and
// op(b, a) differ (max of +0 and -0, NaNs), so all ranks end bitwise
// identical. Every combination depends only on n, never on timing.
#include <algorithm>
#include <vector>

#include "meshtrain/comm/collectives/collectives.hpp"
#include "meshtrain/comm/collectives/steps.hpp"

namespace meshtrain::comm {
namespace {

constexpr size_t kPieceBytes = size_t{1} << 20;

}  // namespace

void recursive_doubling_all_reduce(Transport& t, Buffer data, ReduceKind op, const CollectiveOptions& options) {
  const int n = t.size();
  if (n == 1) return;
  auto* bytes = static_cast<std::byte*>(data.data);
  const size_t width = dtype_bytes(data.dtype), total = data.bytes();
  const size_t chunk = options.chunk_bytes;
  const Reduction reduction = detail::reduction_for(op, data.dtype);
  const detail::PowerOfTwoFold fold = detail::fold_in(t, bytes, total, reduction, chunk, width);
  if (fold.newrank < 0) return;
  const int p = fold.p, newrank = fold.newrank;

  // The peer's partial result lands in a scratch area of at most one piece,
  // kept per thread across calls (no page faults after the first call); a
  // larger buffer goes through each step piece by piece.
  thread_local std::vector<std::byte> incoming;
  const size_t piece = std::max(width, kPieceBytes / width * width);
  if (incoming.size() < std::min(total, piece)) incoming.resize(std::min(total, piece));
  for (int distance = 1; distance < p; distance *= 2) {
    const int peer_newrank = newrank ^ distance;
    const int peer = fold.rank_of(peer_newrank);
    size_t offset = 0;
    do {  // at least once: a zero-length buffer still exchanges (length checks)
      const size_t len = std::min(piece, total - offset);
      std::byte* mine = bytes + offset;
      detail::exchange_chunked(t, peer, mine, len, peer, incoming.data(), len, nullptr, chunk, width);
      if (newrank < peer_newrank)
        reduce_into(mine, incoming.data(), len, reduction);
      else
        reduce_into_after(mine, incoming.data(), len, reduction);
      offset += len;
    } while (offset < total);
  }
  if (op == ReduceKind::Avg) detail::scale_average(bytes, data.count, data.dtype, n);

  detail::fold_out(t, fold, bytes, total, chunk, width);
}

}  // namespace meshtrain::comm
