#include "meshtrain/nn/tensor_parallel.hpp"

#include <string>

#include "meshtrain/core/error.hpp"

namespace meshtrain::nn {

int64_t sequence_rows(const TensorParallelComm& tp, int64_t N) {
  if (N % tp.size() != 0)
    throw Error("sequence parallelism: " + std::to_string(N) + " rows do not split over the " +
                std::to_string(tp.size()) + " tensor-parallel ways");
  return N / tp.size();
}

}  // namespace meshtrain::nn
