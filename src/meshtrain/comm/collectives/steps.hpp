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
