#pragma once
// How a buffer of `count` elements splits into R segments and each segment
// into chunks; computed the same way by workers and reducers so every send
// has a receive of the same length.
#include <algorithm>
#include <cstddef>
#include <vector>

#include "meshtrain/comm/collectives/collectives.hpp"

namespace meshtrain::comm::reduction_server {

struct ChunkPlan {
  std::vector<size_t> bounds;  // R + 1 segment boundaries, elements
  size_t chunk_elems = 1;      // elements per chunk (the last of a segment may be shorter)

  ChunkPlan(size_t count, int reducers, size_t chunk_bytes, size_t width)
      : bounds(segment_bounds(count, reducers)), chunk_elems(std::max<size_t>(1, chunk_bytes / width)) {}

  size_t segment_elems(int j) const { return bounds[size_t(j) + 1] - bounds[size_t(j)]; }
  size_t chunks(int j) const { return (segment_elems(j) + chunk_elems - 1) / chunk_elems; }
  size_t max_chunks() const {
    size_t c = 0;
    for (size_t j = 0; j + 1 < bounds.size(); ++j) c = std::max(c, chunks(int(j)));
    return c;
  }
  // First element and length of chunk c of segment j.
  size_t chunk_begin(int j, size_t c) const { return bounds[size_t(j)] + c * chunk_elems; }
  size_t chunk_elems_of(int j, size_t c) const { return std::min(chunk_elems, segment_elems(j) - c * chunk_elems); }
};

}  // namespace meshtrain::comm::reduction_server
