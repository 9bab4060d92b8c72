#pragma once
// Names of the all-reduce algorithms and the reductions the collectives
// offer. Kept free of other includes so a planner can read the cost table
// (cost_model.hpp) without the rest of comm/.
#include <string_view>

namespace meshtrain::comm {

enum class AllReduceAlgorithm {
  Auto,             // chosen per call from the cost table (cost_model.hpp)
  Ring,             // ring_all_reduce.cpp: bandwidth-optimal, 2(n-1) steps
  Tree,             // tree_all_reduce.cpp: pipelined binary tree, 2 log2(n) deep
  HalvingDoubling,  // halving_doubling_all_reduce.cpp: 2 log2(n) steps, 2x data
  RecursiveDoubling,  // recursive_doubling_all_reduce.cpp: log2(n) steps, log2(n)x data
  ReductionServer,  // reduction_server/: through reducer processes, 2 steps, 1x data
                    // (needs ProcessGroup::use_reducers; never chosen by Auto)
};

// Sum, Max, Min combine element-wise. Avg is Sum followed by x / n on the
// one rank that finishes each element (floats: IEEE division, ints:
// truncation toward zero); the result is then copied, so every rank holds
// bitwise-identical values.
enum class ReduceKind { Sum, Avg, Max, Min };

std::string_view algorithm_name(AllReduceAlgorithm algorithm);
// "auto", "ring", "tree", "halving_doubling" (or "hd"), "recursive_doubling"
// (or "rd"), "reduction_server";
// ConfigError for any other name.
AllReduceAlgorithm parse_all_reduce_algorithm(std::string_view name);
std::string_view reduce_kind_name(ReduceKind kind);

}  // namespace meshtrain::comm
