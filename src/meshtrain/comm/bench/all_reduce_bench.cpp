#include "meshtrain/comm/bench/all_reduce_bench.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "meshtrain/core/aligned_buffer.hpp"
#include "meshtrain/core/error.hpp"

namespace meshtrain::comm::bench {
namespace {

using Clock = std::chrono::steady_clock;

void check_size(ProcessGroup& group, const AllReduceBenchOptions& options, std::span<float> data) {
  const int rank = group.rank(), n = group.size();
  for (size_t i = 0; i < data.size(); ++i) data[i] = check_input(rank, i);
  group.all_reduce(data, ReduceKind::Sum, options.algorithm);
  for (size_t i = 0; i < data.size(); ++i) {
    if (data[i] == check_sum(n, i)) continue;
    throw Error("bench collectives --check: " + options.algo_name + " all-reduce of " +
                std::to_string(data.size() * sizeof(float)) + " bytes over " + std::to_string(n) + " ranks: rank " +
                std::to_string(rank) + " holds " + std::to_string(data[i]) + " at element " + std::to_string(i) +
                ", expected " + std::to_string(check_sum(n, i)));
  }
  std::fill(data.begin(), data.end(), 0.0f);  // timed calls then add zeros: values stay finite
}

}  // namespace

void run_all_reduce_bench(ProcessGroup& group, const AllReduceBenchOptions& options,
                          const std::function<void(const BenchResult&)>& report) {
  const size_t largest = options.sizes.empty() ? 0 : *std::max_element(options.sizes.begin(), options.sizes.end());
  AlignedBuffer<float> buffer(largest / sizeof(float), MemoryKind::Communication);  // allocated and touched once
  const int n = group.size();
  for (size_t bytes : options.sizes) {
    if (bytes % sizeof(float) != 0)
      throw ConfigError("bench collectives: size " + std::to_string(bytes) + " is not a multiple of 4 bytes (fp32)");
    std::span<float> data(buffer.data(), bytes / sizeof(float));
    group.barrier();
    if (options.check) check_size(group, options, data);
    for (int i = 0; i < warmup_iterations(bytes, options.iters); ++i)
      group.all_reduce(data, ReduceKind::Sum, options.algorithm);

    std::vector<double> seconds(static_cast<size_t>(timed_iterations(bytes, options.iters)));
    for (double& s : seconds) {
      const auto start = Clock::now();
      group.all_reduce(data, ReduceKind::Sum, options.algorithm);
      s = std::chrono::duration<double>(Clock::now() - start).count();
    }
    group.all_reduce(seconds, ReduceKind::Max, AllReduceAlgorithm::Ring);  // the slowest rank, per iteration

    if (group.rank() != 0) continue;
    BenchResult result;
    result.algo = options.algo_name;
    if (options.algorithm == AllReduceAlgorithm::Auto)
      result.chosen = algorithm_name(choose_all_reduce(group.communicator().options().costs, bytes, n));
    result.transport = group.communicator().transport_name();
    result.nproc = n;
    result.reducers = options.reducers;
    result.bytes = bytes;
    finish_all_reduce(result, std::move(seconds));
    report(result);
  }
}

}  // namespace meshtrain::comm::bench
