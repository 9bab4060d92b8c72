#include "meshtrain/comm/reduction_server/groups.hpp"

#include <string>

#include "meshtrain/core/error.hpp"

namespace meshtrain::comm::reduction_server {
namespace {

void check_split(int workers, int reducers, int groups) {
  if (groups < 1 || workers % groups != 0 || reducers % groups != 0)
    throw ConfigError("reduction server: " + std::to_string(workers) + " workers and " + std::to_string(reducers) +
                      " reducers do not split into " + std::to_string(groups) +
                      " data-parallel groups (one per tensor-parallel rank): the reducers must be a multiple of "
                      "parallel.tensor");
}

}  // namespace

GroupRanks group_ranks(int workers, int reducers, int groups, int group) {
  check_split(workers, reducers, groups);
  GroupRanks ranks;
  for (int w = group; w < workers; w += groups) ranks.workers.push_back(w);
  const int per_group = reducers / groups;
  for (int j = 0; j < per_group; ++j) ranks.reducers.push_back(workers + group * per_group + j);
  return ranks;
}

int reducer_group(int workers, int reducers, int groups, int rank) {
  check_split(workers, reducers, groups);
  return (rank - workers) / (reducers / groups);
}

void announce_groups(Transport& transport, int workers, int reducers, uint32_t groups) {
  std::vector<SendOp> sends;
  for (int r = workers; r < workers + reducers; ++r) sends.push_back({r, &groups, sizeof groups});
  transport.exchange(sends, {});
}

GroupRanks receive_assignment(Transport& transport, int workers, int reducers, int rank) {
  uint32_t groups = 0;
  const RecvOp recv{0, &groups, sizeof groups, nullptr};
  transport.exchange({}, {&recv, 1});
  const int count = static_cast<int>(groups);
  return group_ranks(workers, reducers, count, reducer_group(workers, reducers, count, rank));
}

}  // namespace meshtrain::comm::reduction_server
