#pragma once
// The two phases of the ring (ring_all_reduce.cpp), shared with
// reduce_scatter and all_gather (not a public API).
#include <cstddef>
#include <span>

#include "meshtrain/comm/collectives/algorithm.hpp"
#include "meshtrain/comm/transport/transport.hpp"

namespace meshtrain::comm::detail {

// data holds n segments, segment k = elements [bounds[k], bounds[k+1]).
// Afterwards rank r's segment r is op over all ranks' segment r (Avg already
// divided); the other segments hold partial results.
void ring_reduce_scatter(Transport& t, std::byte* data, std::span<const size_t> bounds, DataType dtype,
                         ReduceKind op, size_t chunk_bytes);
// Afterwards every rank's segment k holds rank k's segment k.
void ring_all_gather(Transport& t, std::byte* data, std::span<const size_t> bounds, size_t width,
                     size_t chunk_bytes);

}  // namespace meshtrain::comm::detail
