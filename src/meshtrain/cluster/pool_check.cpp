#include "meshtrain/cluster/pool_check.hpp"

#include "meshtrain/core/error.hpp"

namespace meshtrain {

void check_pools_fit_config(const PoolCounts& pools, const ParallelSection& p, const std::string& where) {
  const std::string settings =
      "parallel.data = \"" + enum_string(p.data) + "\" and parallel.all_reduce = \"" + enum_string(p.all_reduce) + "\"";
  const bool wants_servers =
      p.data == DataParallelism::ParameterServer || p.all_reduce == comm::AllReduceAlgorithm::ReductionServer;
  // One model split over tensor x pipeline workers is one data-parallel way.
  const int64_t model_ways = p.tensor * p.pipeline;
  if (pools.workers > 1 && p.data == DataParallelism::None && pools.workers != model_ways)
    throw ConfigError(where + std::to_string(pools.workers) +
                      " workers need parallel.data = \"allreduce\" or \"parameter_server\"; with \"none\" each "
                      "would train alone into the same directory" +
                      (model_ways > 1 ? " (or start tensor x pipeline = " + std::to_string(model_ways) + " workers)"
                                      : std::string()));
  if (pools.servers > 0 && !wants_servers)
    throw ConfigError(where + std::to_string(pools.servers) +
                      " server replicas (pool 2: parameter servers or reducers) have no role in a job with " +
                      settings);
  if (pools.servers == 0 && wants_servers)
    throw ConfigError(where + "a job with " + settings +
                      " needs at least one server replica (pool 2: parameter servers or reducers)");
}

}  // namespace meshtrain
