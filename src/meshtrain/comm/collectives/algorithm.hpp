#pragma once
// Names of the all-reduce algorithms and the reductions the collectives
// offer. Kept free of other includes (but the name table's) so a planner can
// read the cost table (cost_model.hpp) without the rest of comm/.
#include <span>
#include <string_view>

#include "meshtrain/core/enum_names.hpp"

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

// As a job config and the command line name them (enum_name, parse_enum).
inline constexpr EnumName<AllReduceAlgorithm> kAllReduceAlgorithmNames[] = {
    {AllReduceAlgorithm::Auto, "auto"},
    {AllReduceAlgorithm::Ring, "ring"},
    {AllReduceAlgorithm::Tree, "tree"},
    {AllReduceAlgorithm::HalvingDoubling, "halving_doubling"},
    {AllReduceAlgorithm::RecursiveDoubling, "recursive_doubling"},
    {AllReduceAlgorithm::ReductionServer, "reduction_server"}};
constexpr std::span<const EnumName<AllReduceAlgorithm>> enum_names(AllReduceAlgorithm) {
  return kAllReduceAlgorithmNames;
}

// Sum, Max, Min combine element-wise. Avg is Sum followed by x / n on the
// one rank that finishes each element (floats: IEEE division, ints:
// truncation toward zero); the result is then copied, so every rank holds
// bitwise-identical values.
enum class ReduceKind { Sum, Avg, Max, Min };

// The label logs and reports show ("halving-doubling").
std::string_view algorithm_name(AllReduceAlgorithm algorithm);
// A name of kAllReduceAlgorithmNames, or "hd" / "rd" for halving_doubling /
// recursive_doubling; ConfigError for any other name.
AllReduceAlgorithm parse_all_reduce_algorithm(std::string_view name);
std::string_view reduce_kind_name(ReduceKind kind);

}  // namespace meshtrain::comm
