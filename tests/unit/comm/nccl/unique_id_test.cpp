// An NCCL unique id through meshtrain's own rendezvous store (a real store
// server and two clients, as ranks 0 and 1 of a job): rank 0's bytes reach
// rank 1 exactly, and a value that is not an id is refused by name. No
// NCCL or GPU needed: the id is opaque bytes here.
#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "meshtrain/comm/nccl/unique_id.hpp"
#include "meshtrain/comm/rendezvous/store_client.hpp"
#include "../transport/tcp/tcp_test_util.hpp"

namespace meshtrain::comm::tcp_test {
namespace {

using rendezvous::StoreClient;
using rendezvous::StoreClientOptions;
using rendezvous::TcpStore;

StoreClientOptions nccl_client_options(const TcpStore& store, int rank, int world) {
  return StoreClientOptions{{"127.0.0.1", store.port()}, kToken, kJob, rank, world, 2000ms};
}

TEST(NcclUniqueId, EveryByteSurvivesTheTextForm) {
  std::vector<unsigned char> all(256);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<unsigned char>(i);
  const std::string text = nccl::encode_unique_id(all);
  EXPECT_EQ(text.substr(0, 8), "00010203");
  EXPECT_EQ(text.substr(text.size() - 4), "feff");
  EXPECT_EQ(nccl::decode_unique_id(text, all.size(), "k"), all);
}

TEST(NcclUniqueId, AValueThatIsNotAnIdIsRefusedNamingTheKey) {
  for (const std::string& bad : {std::string("abc"), std::string(256, 'g'), std::string(256, 'A')}) {
    try {
      nccl::decode_unique_id(bad, 128, "nccl/data/0");
      ADD_FAILURE() << "accepted '" << bad.substr(0, 8) << "...'";
    } catch (const CommError& e) {
      EXPECT_NE(std::string(e.what()).find("'nccl/data/0'"), std::string::npos) << e.what();
    }
  }
}

TEST(NcclUniqueId, RankZerosIdReachesTheOthersThroughTheStore) {
  TcpStore store(store_options(2));
  std::vector<unsigned char> made(128);
  for (size_t i = 0; i < made.size(); ++i) made[i] = static_cast<unsigned char>(255 - i * 3);
  int calls = 0;
  auto reader = std::async(std::launch::async, [&] {
    StoreClient b(nccl_client_options(store, 1, 2));
    return nccl::share_unique_id(b, "nccl/data/0", 1, made.size(), [&]() -> std::vector<unsigned char> {
      ADD_FAILURE() << "rank 1 made an id";
      return {};
    });
  });
  StoreClient a(nccl_client_options(store, 0, 2));
  std::this_thread::sleep_for(20ms);  // rank 1 is waiting on the key first
  const auto mine = nccl::share_unique_id(a, "nccl/data/0", 0, made.size(), [&] {
    ++calls;
    return made;
  });
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(mine, made);
  EXPECT_EQ(reader.get(), made);
}

}  // namespace
}  // namespace meshtrain::comm::tcp_test
