// Every operation of a ProcessGroup lands in the flight recorder's ring
// (comm/flight/): collectives with the group's next sequence number, sends
// and receives numbered per peer and direction, each completed or failed.
// The recorder is one per process, so the world runs in a forked child.
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include "../collectives/harness.hpp"
#include "meshtrain/comm/flight/flight_reader.hpp"
#include "meshtrain/comm/flight/flight_recorder.hpp"

namespace meshtrain::comm::testing {
namespace {

TEST(FlightHookTest, ProcessGroupOperationsAreRecorded) {
  std::string tmpl = std::filesystem::temp_directory_path() / "flight-hook.XXXXXX";
  const std::string dir = mkdtemp(tmpl.data());
  const pid_t pid = fork();
  if (pid == 0) {
    int status = 0;
    try {
      if (!flight::open_ring(dir, 0, 2, "hook", 256)) _exit(1);
      flight::set_phase(4, flight::Phase::Backward);
      World world(transport_factories().front(), 2);
      std::vector<std::vector<float>> x(2, std::vector<float>(100, 1.0f));
      world.run([&](int r) { return world.groups[size_t(r)].all_reduce_async(x[size_t(r)]); });
      float one = 1, got = 0;
      world.run([&](int r) {
        return r == 0 ? world.groups[0].exchange_async({SendOp{1, &one, sizeof one}}, {})
                      : world.groups[1].exchange_async({}, {RecvOp{0, &got, sizeof got, nullptr}});
      });
      world.run([&](int r) { return world.groups[size_t(r)].barrier_async(); });
      if (got != 1) status = 3;
    } catch (...) {
      status = 2;
    }
    _exit(status);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);
  const flight::RankRing ring = flight::read_ring(dir + "/worker-0.ring");
  std::filesystem::remove_all(dir);
  ASSERT_EQ(ring.groups.size(), 1u);
  EXPECT_EQ(ring.groups[0].name, "all");
  EXPECT_EQ(ring.groups[0].members, (std::vector<int>{0, 1}));
  ASSERT_EQ(ring.records.size(), 6u);
  for (const flight::RingRecord& r : ring.records) {
    EXPECT_EQ(r.state, flight::State::Completed);
    EXPECT_EQ(r.step, 4);
    EXPECT_EQ(r.phase, flight::Phase::Backward);
    EXPECT_EQ(r.group, 0);
  }
  for (int i : {0, 1}) {
    EXPECT_EQ(ring.records[size_t(i)].op, flight::Op::AllReduce);
    EXPECT_EQ(ring.records[size_t(i)].seq, 1u);
    EXPECT_EQ(ring.records[size_t(i)].bytes, 400u);
  }
  // The two ranks' halves of the exchange, in either order.
  const flight::RingRecord& a = ring.records[2];
  const flight::RingRecord& b = ring.records[3];
  const flight::RingRecord& send = a.op == flight::Op::Send ? a : b;
  const flight::RingRecord& recv = a.op == flight::Op::Send ? b : a;
  EXPECT_EQ(send.op, flight::Op::Send);
  EXPECT_EQ(send.peer, 1);
  EXPECT_EQ(send.seq, 1u);
  EXPECT_EQ(recv.op, flight::Op::Recv);
  EXPECT_EQ(recv.peer, 0);
  EXPECT_EQ(recv.seq, 1u);
  EXPECT_EQ(send.bytes, sizeof(float));
  for (int i : {4, 5}) {
    EXPECT_EQ(ring.records[size_t(i)].op, flight::Op::Barrier);
    EXPECT_EQ(ring.records[size_t(i)].seq, 2u);  // the group's second collective
  }
}

}  // namespace
}  // namespace meshtrain::comm::testing
