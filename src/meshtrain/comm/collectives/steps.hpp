#pragma once
// Building blocks shared by the collective algorithms (not a public API).
#include <cstddef>
#include <cstring>
#include <memory>
#include <string>

#include "meshtrain/comm/collectives/algorithm.hpp"
#include "meshtrain/comm/collectives/buffer.hpp"
#include "meshtrain/comm/transport/transport.hpp"

namespace meshtrain::comm::detail {

// One step's transfer: `send_bytes` to send_peer and `recv_bytes` from
// recv_peer (-1: none), each cut into chunks of at most chunk_bytes (whole
// elements of `width` bytes) and posted in one exchange. A side with a peer
// always sends at least one message, even an empty one, so ranks that
// disagree on counts fail on the length check instead of drifting apart.
void exchange_chunked(Transport& t, int send_peer, const std::byte* send, size_t send_bytes, int recv_peer,
                      std::byte* recv, size_t recv_bytes, const Reduction* reduce, size_t chunk_bytes,
                      size_t width);

// The fold of the power-of-two algorithms (halving-doubling, recursive
// doubling) for n ranks: p = the largest power of two <= n, extra = n - p.
// Each even rank r < 2 extra hands its whole buffer to r + 1, which reduces
// it in, and sits out; the other p ranks take new ranks 0 .. p-1 (r / 2 if
// r < 2 extra, else r - extra) and run the algorithm among themselves; at
// the end r + 1 hands the result back.
struct PowerOfTwoFold {
  int p = 1, extra = 0;
  int newrank = -1;  // -1: this rank sat out and already holds the result
  int rank_of(int new_rank) const { return new_rank < extra ? 2 * new_rank + 1 : new_rank + extra; }
};
// The fold's first half (for a rank that sits out: both halves).
PowerOfTwoFold fold_in(Transport& t, std::byte* data, size_t bytes, const Reduction& reduction, size_t chunk_bytes,
                       size_t width);
// The fold's second half: hands the result back to the rank that sat out.
void fold_out(Transport& t, const PowerOfTwoFold& fold, const std::byte* data, size_t bytes, size_t chunk_bytes,
              size_t width);

// The element-wise reduction a ReduceKind needs (Avg combines as Sum).
Reduction reduction_for(ReduceKind op, DataType dtype);
// Avg's final step, x / n, applied once by the rank that finishes x.
void scale_average(std::byte* data, size_t count, DataType dtype, int n);

// memcpy that accepts empty ranges, whose pointers may be null (count 0
// buffers): memcpy itself must never see a null pointer.
inline void copy_bytes(void* dst, const void* src, size_t bytes) {
  if (bytes != 0) std::memcpy(dst, src, bytes);
}

// An uninitialized scratch area.
inline std::unique_ptr<std::byte[]> scratch(size_t bytes) {
  return std::make_unique_for_overwrite<std::byte[]>(bytes ? bytes : 1);
}

[[noreturn]] void invalid(const std::string& what);

}  // namespace meshtrain::comm::detail
