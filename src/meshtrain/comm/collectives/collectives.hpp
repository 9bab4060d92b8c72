#pragma once
// Collective algorithms, written once over Transport::exchange and run
// unchanged on every transport. Each call is made by every rank of the
// transport (a process group passes a GroupTransport whose ranks are the
// group's), with the same counts, dtype, root and algorithm; different counts
// are detected by the transport's length check and become a CommError.
//
// Counts are elements, never bytes. Every algorithm is bitwise deterministic
// for a given group: the order in which contributions are combined is fixed
// by the algorithm, not by timing, and each reduced element is computed on
// one rank and copied to the others, so all ranks hold identical bytes.
//
// Uneven sizes: reduce_scatter takes equal counts per rank. A caller with a
// total not divisible by n pads it, or uses segment_bounds(total, n), the
// split the ring uses internally: the first total % n segments get one more
// element than the rest.
#include <cstddef>
#include <span>
#include <vector>

#include "meshtrain/comm/collectives/algorithm.hpp"
#include "meshtrain/comm/collectives/buffer.hpp"
#include "meshtrain/comm/collectives/cost_model.hpp"
#include "meshtrain/comm/transport/transport.hpp"

namespace meshtrain::comm {

struct CollectiveOptions {
  // Ring, halving-doubling, all-gather, all-to-all: a step's data travels in
  // chunks this big, posted together, so the transport reduces one chunk
  // while the next is in flight and synchronization is amortized.
  size_t chunk_bytes = size_t{512} << 10;
  CostTable costs;  // Auto's choice; tree's chunk size is costs.tree_chunk_bytes
};

// Boundaries of n segments over `total` elements: segment k is
// [bounds[k], bounds[k+1]); the first total % n segments are one longer.
std::vector<size_t> segment_bounds(size_t total, int n);

// In place: every rank's `data` becomes op over all ranks' `data`.
void all_reduce(Transport& t, Buffer data, ReduceKind op, AllReduceAlgorithm algorithm,
                const CollectiveOptions& options = {});
void ring_all_reduce(Transport& t, Buffer data, ReduceKind op, const CollectiveOptions& options);
void tree_all_reduce(Transport& t, Buffer data, ReduceKind op, const CollectiveOptions& options);
void halving_doubling_all_reduce(Transport& t, Buffer data, ReduceKind op, const CollectiveOptions& options);
void recursive_doubling_all_reduce(Transport& t, Buffer data, ReduceKind op, const CollectiveOptions& options);

// input: n * output.count elements; rank r's output = op over all ranks of
// input segment r (ring order). output may alias input segment r.
void reduce_scatter(Transport& t, ConstBuffer input, Buffer output, ReduceKind op,
                    const CollectiveOptions& options = {});
// The same, reducing inside `data` (n * output.count elements, left
// clobbered) instead of a copy of it: no scratch allocation, no copy. output
// may alias data's segment r.
void reduce_scatter_in_place(Transport& t, Buffer data, Buffer output, ReduceKind op,
                             const CollectiveOptions& options = {});
// output: n * input.count elements, segment r from rank r (ring). input may
// alias output segment r (in place).
void all_gather(Transport& t, ConstBuffer input, Buffer output, const CollectiveOptions& options = {});
// Root's data is copied to every rank (pipelined binary tree rooted at root).
void broadcast(Transport& t, Buffer data, int root, const CollectiveOptions& options = {});
// Root's data becomes op over all ranks (pipelined binary tree); the other
// ranks' buffers are left unchanged.
void reduce(Transport& t, Buffer data, int root, ReduceKind op, const CollectiveOptions& options = {});
// Equal splits: input and output hold n blocks of count / n elements; block j
// of rank i's input lands in block i of rank j's output. No aliasing.
void all_to_all(Transport& t, ConstBuffer input, Buffer output, const CollectiveOptions& options = {});
// Variable splits (mixture-of-experts dispatch): input holds send_counts[j]
// elements for rank j, packed in rank order; output receives recv_counts[i]
// elements from rank i, packed in rank order. Counts must agree pairwise.
void all_to_all_v(Transport& t, ConstBuffer input, std::span<const size_t> send_counts, Buffer output,
                  std::span<const size_t> recv_counts, const CollectiveOptions& options = {});
// Returns on every rank only after every rank has entered (dissemination).
void barrier(Transport& t);

}  // namespace meshtrain::comm
