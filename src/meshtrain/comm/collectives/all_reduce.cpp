// all_reduce: picks the algorithm (Auto reads the cost table) and runs it.
// Every rank computes the same choice from the same byte count and group
// size, so they agree without talking.
#include "meshtrain/comm/collectives/collectives.hpp"
#include "meshtrain/core/error.hpp"

namespace meshtrain::comm {

void all_reduce(Transport& t, Buffer data, ReduceKind op, AllReduceAlgorithm algorithm,
                const CollectiveOptions& options) {
  if (algorithm == AllReduceAlgorithm::Auto) algorithm = choose_all_reduce(options.costs, data.bytes(), t.size());
  switch (algorithm) {
    case AllReduceAlgorithm::Ring: ring_all_reduce(t, data, op, options); return;
    case AllReduceAlgorithm::Tree: tree_all_reduce(t, data, op, options); return;
    case AllReduceAlgorithm::HalvingDoubling: halving_doubling_all_reduce(t, data, op, options); return;
    case AllReduceAlgorithm::RecursiveDoubling: recursive_doubling_all_reduce(t, data, op, options); return;
    case AllReduceAlgorithm::ReductionServer:
      throw CommError("all_reduce: reduction_server needs reducer processes (ProcessGroup::use_reducers)");
    case AllReduceAlgorithm::Auto: break;
  }
}

}  // namespace meshtrain::comm
