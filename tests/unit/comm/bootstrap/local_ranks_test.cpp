// Learning which ranks share a host at rendezvous.
#include "meshtrain/comm/bootstrap/local_ranks.hpp"

#include <gtest/gtest.h>

#include <barrier>
#include <thread>

#include "meshtrain/comm/bootstrap/job_rendezvous.hpp"
#include "meshtrain/comm/transport/tcp/socket.hpp"

namespace meshtrain::comm {
namespace {

TEST(LocalRanks, GroupsRanksByHostIdentity) {
  const std::vector<std::string> ids{"a", "b", "a", "b", "a"};
  LocalRanks r2 = local_ranks_from(ids, 2);
  EXPECT_EQ(r2.local_rank, 1);
  EXPECT_EQ(r2.local_world_size, 3);
  EXPECT_EQ(r2.num_hosts, 2);
  LocalRanks r3 = local_ranks_from(ids, 3);
  EXPECT_EQ(r3.local_rank, 1);
  EXPECT_EQ(r3.local_world_size, 2);
  LocalRanks alone = local_ranks_from({"x"}, 0);
  EXPECT_EQ(alone.local_rank, 0);
  EXPECT_EQ(alone.local_world_size, 1);
}

TEST(LocalRanks, IdentityNamesBootAndNamespaces) {
  const std::string id = this_host_identity();
  EXPECT_EQ(id, this_host_identity());  // stable within a process
  for (const char* part : {" boot=", " net=net:[", " pid=pid:[", " shm="}) EXPECT_NE(id.find(part), std::string::npos) << id;
}

// Three ranks as threads meet at rank 0's own store (as under Kubeflow's
// PyTorchJob: no LOCAL_WORLD_SIZE) and find they share this host.
TEST(LocalRanks, LearnedThroughRankZerosStore) {
  tcp::Fd probe = tcp::listen_on("127.0.0.1", 0);
  const int port = tcp::local_endpoint(probe.get()).port;
  probe.reset();  // free the port for rank 0's store
  constexpr int kWorld = 3;
  std::vector<LocalRanks> got(kWorld);
  std::barrier finished(kWorld);
  std::vector<std::thread> ranks;
  for (int r = 0; r < kWorld; ++r) {
    ranks.emplace_back([&, r] {
      LaunchEnv env;
      env.rank = r;
      env.world_size = kWorld;
      env.master_port = port;
      env.job_id = "local-ranks-test";
      env.token = "secret";
      JobRendezvous rdzv(env, std::chrono::milliseconds(20000));
      got[static_cast<size_t>(r)] = learn_local_ranks(rdzv.store(), r, kWorld);
      finished.arrive_and_wait();  // rank 0's store outlives every rank's last reply
    });
  }
  for (auto& t : ranks) t.join();
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_EQ(got[static_cast<size_t>(r)].local_rank, r);
    EXPECT_EQ(got[static_cast<size_t>(r)].local_world_size, kWorld);
    EXPECT_EQ(got[static_cast<size_t>(r)].num_hosts, 1);
  }
}

}  // namespace
}  // namespace meshtrain::comm
