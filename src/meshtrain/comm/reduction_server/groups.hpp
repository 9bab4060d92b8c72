#pragma once
// Reducers shared out among several data-parallel groups. Under tensor
// parallelism the workers form T data-parallel groups (worker w belongs to
// group w % T: the mesh's tensor ways vary fastest), each all-reducing its
// own gradients. The R reducers split into T equal sets, set g (reducers
// g R/T .. (g+1) R/T - 1) serving group g alone, so every reducer still sees
// one request per worker of its group and the protocol is unchanged.
//
// The reducers learn T from worker 0, which sends it to each of them before
// any request (a reducer is started without the job's config).
#include <cstdint>
#include <vector>

#include "meshtrain/comm/transport/transport.hpp"

namespace meshtrain::comm::reduction_server {

struct GroupRanks {
  std::vector<int> workers;   // global ranks, in worker order
  std::vector<int> reducers;  // global ranks, in segment order
};

// Group `group` of `groups` among `workers` worker ranks (0 .. workers-1) and
// `reducers` reducer ranks after them. Throws ConfigError, naming the
// counts, when the workers or the reducers do not split into `groups`.
GroupRanks group_ranks(int workers, int reducers, int groups, int group);

// The group a reducer of global rank `rank` serves.
int reducer_group(int workers, int reducers, int groups, int rank);

// Worker 0: tells every reducer (global ranks workers .. workers+reducers-1)
// how many groups there are, before any request; every program whose
// workers use reducers does (meshtrain train, bench collectives).
void announce_groups(Transport& transport, int workers, int reducers, uint32_t groups);
// Reducer of global rank `rank`: receives the group count from worker 0 and
// returns the workers and reducers of the group it serves.
GroupRanks receive_assignment(Transport& transport, int workers, int reducers, int rank);

}  // namespace meshtrain::comm::reduction_server
