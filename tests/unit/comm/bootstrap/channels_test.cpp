// A channel per mesh axis (connect.hpp's connect_transports): each channel
// is an ordered stream of its own, so a small all-reduce on the tensor
// axis's channel completes while a large data-parallel bucket is still in
// flight on the main one. With one channel for both, the small one would
// queue behind the bucket, and here (the bucket's peer joins only after the
// small one) the ranks would wait on each other until the timeout.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <future>
#include <thread>

#include "meshtrain/comm/bootstrap/connect.hpp"
#include "meshtrain/comm/group/communicator.hpp"
#include "meshtrain/comm/group/process_group.hpp"

namespace meshtrain::comm {
namespace {

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

struct Channels {
  std::shared_ptr<Communicator> main, tensor;
};

// Both ranks' two channels, connected concurrently (connect blocks until
// every rank has joined).
std::vector<Channels> connect_two_ranks(const std::string& kind) {
  static std::atomic<int> counter{0};
  const std::string job = "channels-" + kind + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
  const int port = free_port();
  std::vector<std::future<std::vector<std::unique_ptr<Transport>>>> connecting;
  for (int rank = 0; rank < 2; ++rank)
    connecting.push_back(std::async(std::launch::async, [=] {
      LaunchEnv env;
      env.rank = env.local_rank = rank;
      env.world_size = env.local_world_size = 2;
      env.job_id = job;
      env.token = "channels-test-token-0123456789";
      env.master_port = port;
      TransportOptions options;
      options.timeout = std::chrono::seconds(20);
      return connect_transports(env, *parse_enum<TransportKind>(kind), options, {"", "tp"});
    }));
  std::vector<Channels> ranks;
  for (auto& c : connecting) {
    auto transports = c.get();
    EXPECT_EQ(transports.size(), 2u);
    ranks.push_back({std::make_shared<Communicator>(std::move(transports[0])),
                     std::make_shared<Communicator>(std::move(transports[1]))});
  }
  return ranks;
}

class ChannelTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ChannelTest, TensorAllReduceCompletesWhileABucketIsInFlight) {
  std::vector<Channels> ranks = connect_two_ranks(GetParam());
  std::promise<void> small_done_on_rank0;
  std::shared_future<void> go = small_done_on_rank0.get_future().share();
  const size_t bucket = size_t{8} << 20;  // 32 MiB of floats, as a large DP bucket
  bool bucket_still_in_flight = false;
  std::thread rank0([&] {
    ProcessGroup data(ranks[0].main), tensor(ranks[0].tensor);
    std::vector<float> grads(bucket, 1.0f), act(64, 2.0f);
    WorkHandle in_flight = data.all_reduce_async(std::span<float>(grads));
    tensor.all_reduce(std::span<float>(act));  // rank 1 has not touched the bucket yet
    bucket_still_in_flight = !in_flight->is_completed();
    EXPECT_EQ(act[0], 4.0f);
    small_done_on_rank0.set_value();
    in_flight->wait();
    EXPECT_EQ(grads[0], 2.0f);
    EXPECT_EQ(grads[bucket - 1], 2.0f);
  });
  std::thread rank1([&] {
    ProcessGroup data(ranks[1].main), tensor(ranks[1].tensor);
    std::vector<float> grads(bucket, 1.0f), act(64, 2.0f);
    tensor.all_reduce(std::span<float>(act));
    go.wait();  // the bucket starts on this rank only now
    data.all_reduce(std::span<float>(grads));
    EXPECT_EQ(act[63], 4.0f);
    EXPECT_EQ(grads[0], 2.0f);
  });
  rank0.join();
  rank1.join();
  EXPECT_TRUE(bucket_still_in_flight);
}

INSTANTIATE_TEST_SUITE_P(Transports, ChannelTest, ::testing::Values("shm", "tcp"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace meshtrain::comm
