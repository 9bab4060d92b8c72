#pragma once
// Alpha-beta cost model of the all-reduce algorithms, kept as data: one row
// per algorithm with a per-message latency (alpha) and a per-byte time
// (beta). The runtime's AllReduceAlgorithm::Auto and the planner read the
// same table; benchmarks (bench/) replace the default rows with measured ones.
//
// Time of one all-reduce of B bytes over n ranks, with p = 2^floor(log2 n),
// h = floor(log2 n) (depth of the binary tree), C = ceil(B / chunk):
//   ring              2(n-1) alpha + 2(n-1)/n B beta
//   tree              2(h + C - 1) (alpha + 2 min(B, chunk) beta)   (a node
//                     takes chunks from two children per pipeline step)
//   halving-doubling  2 log2(p) alpha + 2(p-1)/p B beta, plus the fold for
//                     n != p: 2 alpha + 2 B beta
//   recursive doubling log2(p) (alpha + B beta), plus the same fold
// Auto picks the smallest estimate (ties: ring, then halving-doubling, then
// tree, then recursive doubling).
#include <array>
#include <cstddef>
#include <span>

#include "meshtrain/comm/collectives/algorithm.hpp"

namespace meshtrain::comm {

struct AlgorithmCost {
  AllReduceAlgorithm algorithm;
  double alpha_s;          // seconds per message step (latency, synchronization)
  double beta_s_per_byte;  // seconds per byte moved and reduced
};

struct CostTable {
  // Defaults: shared memory on one host, ~5 us per step and ~10 GB/s per
  // link; halving-doubling's strided halves reduce a little slower, and
  // recursive doubling copies each step's incoming buffer once more (so Auto
  // keeps it to messages below ~32-64 KiB).
  std::array<AlgorithmCost, 5> all_reduce{{
      {AllReduceAlgorithm::Ring, 5e-6, 1.0e-10},
      {AllReduceAlgorithm::HalvingDoubling, 5e-6, 1.1e-10},
      {AllReduceAlgorithm::RecursiveDoubling, 5e-6, 2.0e-10},
      {AllReduceAlgorithm::Tree, 5e-6, 1.0e-10},
      {AllReduceAlgorithm::ReductionServer, 5e-6, 1.0e-10},
  }};
  size_t tree_chunk_bytes = size_t{64} << 10;

  const AlgorithmCost& row(AllReduceAlgorithm algorithm) const;
  // Every algorithm on one link (a measured or planned one): the link's alpha
  // for all, its beta scaled by each row's default ratio to the ring's (so
  // recursive doubling keeps its extra copy and Auto's choices keep their
  // crossovers).
  static CostTable on_one_link(double alpha_s, double beta_s_per_byte);
};

// Estimated seconds for one all-reduce of `bytes` over `ranks` ranks.
double all_reduce_seconds(const CostTable& table, AllReduceAlgorithm algorithm, size_t bytes, int ranks);
// Estimated seconds for one ring all-gather (or reduce-scatter) of `bytes`
// in all over `ranks` ranks, on the ring row: (n-1) alpha + (n-1)/n B beta.
double all_gather_seconds(const CostTable& table, size_t bytes, int ranks);
// The algorithm with the smallest estimate (never Auto).
AllReduceAlgorithm choose_all_reduce(const CostTable& table, size_t bytes, int ranks);

// What `pieces` collectives of `piece_s` seconds each add to a compute
// window of `window_s` when they run one after another on a stream of their
// own: piece i is ready at i / pieces of the window (a block's gradients
// after its backward), or needed at (i - 1) / pieces of it (a prefetched
// gather before its block), and only the time past the window counts:
//   piece_s + (pieces - 1) max(0, piece_s - window_s / pieces)
// The first piece (gather) or the last (reduction) never hides.
double exposed_seconds(double piece_s, int pieces, double window_s);
// The same for pieces of their own lengths, piece i ready ready_s[i]
// seconds into the window (non-decreasing, as many as pieces).
double exposed_seconds(std::span<const double> piece_s, std::span<const double> ready_s, double window_s);

}  // namespace meshtrain::comm
