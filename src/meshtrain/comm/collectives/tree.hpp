#pragma once
// The two halves of the tree all-reduce (tree_all_reduce.cpp), shared with
// reduce and broadcast (not a public API).
#include <cstddef>

#include "meshtrain/comm/collectives/algorithm.hpp"
#include "meshtrain/comm/transport/transport.hpp"

namespace meshtrain::comm::detail {

// Combines every rank's `input` (count elements) into `accum` on root; Avg
// is divided there. accum may equal input; on a non-root rank pass nullptr
// to have the partial sums kept in a scratch area instead.
void tree_reduce(Transport& t, const std::byte* input, std::byte* accum, size_t count, DataType dtype,
                 ReduceKind op, int root, size_t chunk_bytes);
// Copies root's `data` to every rank.
void tree_broadcast(Transport& t, std::byte* data, size_t count, size_t width, int root, size_t chunk_bytes);

}  // namespace meshtrain::comm::detail
