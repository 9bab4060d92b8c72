// DeviceExpertGroup (parallel/expert/device_expert_group.hpp) over the
// host-staged device collectives, threads as ranks, the rows in the
// cpu-guarded backend's memory (which the host cannot touch between backend
// calls): its all-to-alls give, bit for bit, what ExpertParallelGroup gives
// on the host, for an fp32 and a bf16 wire, with empty segments (to a peer,
// from a peer, to itself) among full ones, and the counts' exchange too.
#include "meshtrain/parallel/expert/device_expert_group.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "meshtrain/comm/device/host_staged_collectives.hpp"
#include "meshtrain/kernels/guarded_backend.hpp"
#include "meshtrain/parallel/expert/expert_parallel_group.hpp"
#include "thread_ranks.hpp"

namespace meshtrain::parallel {
namespace {

constexpr int kExpertRanks = 3;

// Floats rank `from` sends rank `to`: some pairs send nothing (rank 1 to
// itself among them).
size_t routed_floats(int from, int to) { return size_t((from * 3 + to * 5) % 4) * 7; }

struct RoutedRows {
  std::vector<size_t> send_counts, recv_counts;
  std::vector<float> send;
};

RoutedRows rows_of(int rank) {
  RoutedRows rows;
  for (int peer = 0; peer < kExpertRanks; ++peer) {
    rows.send_counts.push_back(routed_floats(rank, peer));
    rows.recv_counts.push_back(routed_floats(peer, rank));
  }
  for (int peer = 0; peer < kExpertRanks; ++peer)
    for (size_t i = 0; i < rows.send_counts[size_t(peer)]; ++i)  // not bf16 values, so the rounding shows
      rows.send.push_back(1.0f / 3.0f * float(rank + 1) + 0.01f * float(peer * 100 + int(i)));
  return rows;
}

size_t total(const std::vector<size_t>& counts) {
  size_t n = 0;
  for (size_t c : counts) n += c;
  return n;
}

std::vector<float> exchanged_on_host(comm::ProcessGroup& group, const RoutedRows& rows, Precision wire) {
  ExpertParallelGroup ep(group, wire);
  std::vector<float> recv(total(rows.recv_counts), -1.0f);
  ep.all_to_all_v(rows.send.data(), rows.send_counts, recv.data(), rows.recv_counts);
  return recv;
}

std::vector<float> exchanged_on_device(comm::ProcessGroup& group, const RoutedRows& rows, Precision wire) {
  kernels::Backend& device = kernels::guarded_backend();
  DeviceExpertGroup ep(std::make_unique<comm::HostStagedCollectives>(group, &device.allocator()), group, device, wire);
  EXPECT_EQ(ep.rank(), group.rank());
  EXPECT_EQ(ep.size(), kExpertRanks);
  DeviceArray<float> send(device.allocator(), MemoryKind::Activations),
      recv(device.allocator(), MemoryKind::Activations);
  send.ensure(std::max<size_t>(rows.send.size(), 1));
  send.upload(rows.send);
  recv.ensure(std::max<size_t>(total(rows.recv_counts), 1));
  recv.upload(std::vector<float>(total(rows.recv_counts), -1.0f));
  ep.all_to_all_v(send.raw(), rows.send_counts, recv.raw(), rows.recv_counts);
  std::vector<float> back(total(rows.recv_counts));
  recv.download(back);
  return back;
}

TEST(DeviceExpertGroup, GivesTheHostGroupsBitsForTheRoutedRows) {
  for (Precision wire : {Precision::Fp32, Precision::Bf16}) {
    SCOPED_TRACE(wire == Precision::Bf16 ? "bf16 wire" : "fp32 wire");
    std::vector<std::vector<float>> host(kExpertRanks), device(kExpertRanks);
    testing::on_inproc_ranks(kExpertRanks, [&](int r, comm::ProcessGroup& group) {
      const RoutedRows rows = rows_of(r);
      host[size_t(r)] = exchanged_on_host(group, rows, wire);
      device[size_t(r)] = exchanged_on_device(group, rows, wire);
    });
    for (int r = 0; r < kExpertRanks; ++r) {
      ASSERT_EQ(device[size_t(r)].size(), host[size_t(r)].size());
      EXPECT_EQ(0, std::memcmp(device[size_t(r)].data(), host[size_t(r)].data(), host[size_t(r)].size() * 4))
          << "rank " << r;
    }
    // Rows moved, not copied in place: rank 0's first rows came from rank 0
    // itself (routed_floats(0, 0) = 0, so from rank 1), rounded on a bf16 wire.
    ASSERT_EQ(routed_floats(0, 0), 0u);
    const float first = 1.0f / 3.0f * 2.0f;
    EXPECT_NEAR(device[0][0], first, wire == Precision::Bf16 ? 4e-3f : 0.0f);
    if (wire == Precision::Bf16) {
      EXPECT_NE(device[0][0], first);
    }
  }
}

TEST(DeviceExpertGroup, ExchangesTheCountsOnTheHost) {
  testing::on_inproc_ranks(kExpertRanks, [&](int r, comm::ProcessGroup& group) {
    kernels::Backend& device = kernels::guarded_backend();
    DeviceExpertGroup ep(std::make_unique<comm::HostStagedCollectives>(group, &device.allocator()), group, device);
    std::vector<int64_t> send(2 * kExpertRanks), recv(2 * kExpertRanks, -1);
    for (int d = 0; d < kExpertRanks; ++d) send[size_t(2 * d)] = 10 * r + d, send[size_t(2 * d + 1)] = -d;
    ep.all_to_all(send.data(), recv.data(), 2);
    for (int s = 0; s < kExpertRanks; ++s) {
      EXPECT_EQ(recv[size_t(2 * s)], 10 * s + r);
      EXPECT_EQ(recv[size_t(2 * s + 1)], -r);
    }
  });
}

}  // namespace
}  // namespace meshtrain::parallel
