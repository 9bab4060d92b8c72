// HostStagedCollectives with threads as ranks: a buffer in a "device's"
// memory (a host allocator that counts its copies) is reduced to the bits
// the group's own collectives give on host memory, with one download and
// one upload per operation, and its scratch is kept between steps.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "meshtrain/comm/device/host_staged_collectives.hpp"
#include "meshtrain/comm/transport/inproc/inproc_transport.hpp"
#include "meshtrain/core/bf16.hpp"
#include "meshtrain/core/error.hpp"
#include "thread_ranks.hpp"

namespace meshtrain::comm {
namespace {

class CountingMemory final : public DeviceAllocator {
 public:
  void* allocate(size_t bytes) override { return std::malloc(bytes); }
  void release(void* p) noexcept override { std::free(p); }
  void zero(void* p, size_t bytes) override { std::memset(p, 0, bytes); }
  void upload(void* dst, const void* src, size_t bytes) override {
    ++uploads;
    uploaded_bytes += bytes;
    std::memcpy(dst, src, bytes);
  }
  void download(void* dst, const void* src, size_t bytes) override {
    ++downloads;
    std::memcpy(dst, src, bytes);
  }
  std::string name() const override { return "counting"; }
  int uploads = 0, downloads = 0;
  size_t uploaded_bytes = 0;
};

std::vector<float> rank_values(int rank, size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = 0.1f * float(rank + 1) + 0.37f * float(i % 101) - 3.0f;
  return v;
}

TEST(HostStagedCollectives, GivesTheGroupsOwnBitsWithOneCopyEachWay) {
  const int ranks = 3;
  const size_t n = 10007;
  std::vector<std::vector<float>> plain(ranks), staged(ranks);
  std::vector<std::vector<Bf16>> plain16(ranks), staged16(ranks);
  std::vector<int> downloads(ranks), uploads(ranks);
  testing::on_inproc_ranks(ranks, [&](int r, ProcessGroup& group) {
    plain[size_t(r)] = staged[size_t(r)] = rank_values(r, n);
    for (float x : rank_values(r, n)) plain16[size_t(r)].push_back(to_bf16(x));
    staged16[size_t(r)] = plain16[size_t(r)];
    HostStagedCollectives on_host(group, nullptr);
    on_host.all_reduce_async(Buffer(std::span(plain[size_t(r)])), ReduceKind::Avg)->wait();
    on_host.all_reduce_async(Buffer(std::span(plain16[size_t(r)])), ReduceKind::Sum)->wait();

    CountingMemory device;
    HostStagedCollectives through_host(group, &device);
    DeviceWorkHandle a = through_host.all_reduce_async(Buffer(std::span(staged[size_t(r)])), ReduceKind::Avg);
    DeviceWorkHandle b = through_host.all_reduce_async(Buffer(std::span(staged16[size_t(r)])), ReduceKind::Sum);
    b->wait();  // in any order
    a->wait();
    downloads[size_t(r)] = device.downloads;
    uploads[size_t(r)] = device.uploads;
  });
  for (int r = 0; r < ranks; ++r) {
    EXPECT_EQ(0, std::memcmp(staged[size_t(r)].data(), plain[size_t(r)].data(), n * sizeof(float))) << r;
    EXPECT_EQ(0, std::memcmp(staged16[size_t(r)].data(), plain16[size_t(r)].data(), n * sizeof(Bf16))) << r;
    EXPECT_EQ(0, std::memcmp(staged[size_t(r)].data(), staged[0].data(), n * sizeof(float))) << "rank " << r;
    EXPECT_EQ(downloads[size_t(r)], 2);
    EXPECT_EQ(uploads[size_t(r)], 2);
  }
  EXPECT_NEAR(staged[0][5], (rank_values(0, n)[5] + rank_values(1, n)[5] + rank_values(2, n)[5]) / 3, 1e-5f);
}

TEST(HostStagedCollectives, ReduceScattersIntoItsOwnSegmentOrElsewhereWithTheGroupsBits) {
  // ZeRO's gradients: 3 ranks' staging (3 segments) averaged into each
  // rank's shard (fp32), or summed in bf16 into the rank's own segment.
  const int ranks = 3;
  const size_t slice = 1001;
  std::vector<std::vector<float>> plain(ranks), staged(ranks);
  std::vector<std::vector<Bf16>> plain16(ranks), staged16(ranks);
  std::vector<int> downloads(ranks);
  std::vector<size_t> uploaded(ranks);
  testing::on_inproc_ranks(ranks, [&](int r, ProcessGroup& group) {
    const size_t mine = size_t(r) * slice;
    std::vector<float> data = rank_values(r, slice * ranks), data2 = data;
    std::vector<Bf16> data16;
    for (float x : data) data16.push_back(to_bf16(x));
    std::vector<Bf16> data16b = data16;
    plain[size_t(r)].assign(slice, -1.0f);
    staged[size_t(r)].assign(slice, -1.0f);
    HostStagedCollectives on_host(group, nullptr);
    on_host.reduce_scatter_async(Buffer(std::span(data)), Buffer(std::span(plain[size_t(r)])), ReduceKind::Avg)->wait();
    on_host.reduce_scatter_async(Buffer(std::span(data16)), Buffer(std::span(data16).subspan(mine, slice)),
                                 ReduceKind::Sum)->wait();
    plain16[size_t(r)].assign(data16.begin() + long(mine), data16.begin() + long(mine + slice));

    CountingMemory device;
    HostStagedCollectives through_host(group, &device);
    through_host.reduce_scatter_async(Buffer(std::span(data2)), Buffer(std::span(staged[size_t(r)])),
                                      ReduceKind::Avg)->wait();
    through_host.reduce_scatter_async(Buffer(std::span(data16b)), Buffer(std::span(data16b).subspan(mine, slice)),
                                      ReduceKind::Sum)->wait();
    staged16[size_t(r)].assign(data16b.begin() + long(mine), data16b.begin() + long(mine + slice));
    downloads[size_t(r)] = device.downloads;
    uploaded[size_t(r)] = device.uploaded_bytes;
  });
  for (int r = 0; r < ranks; ++r) {
    EXPECT_EQ(0, std::memcmp(staged[size_t(r)].data(), plain[size_t(r)].data(), slice * sizeof(float))) << r;
    EXPECT_EQ(0, std::memcmp(staged16[size_t(r)].data(), plain16[size_t(r)].data(), slice * sizeof(Bf16))) << r;
    EXPECT_EQ(downloads[size_t(r)], 2);
    EXPECT_EQ(uploaded[size_t(r)], slice * (sizeof(float) + sizeof(Bf16))) << "only the rank's segment goes back up";
  }
  const size_t at = slice + 5;  // rank 1's element 5
  EXPECT_NEAR(staged[1][5], (rank_values(0, 3 * slice)[at] + rank_values(1, 3 * slice)[at] +
                             rank_values(2, 3 * slice)[at]) / 3, 1e-5f);
}

TEST(HostStagedCollectives, AllGathersInPlaceDownloadingOnlyTheRanksOwnSegment) {
  // ZeRO's parameters: each of 3 ranks' slice, in its place in the gather
  // buffer, reaches every rank (fp32 and the bf16 wire); the rest of a
  // rank's buffer is not read.
  const int ranks = 3;
  const size_t slice = 777;
  std::vector<std::vector<float>> gathered(ranks), on_host(ranks);
  std::vector<std::vector<Bf16>> gathered16(ranks);
  std::vector<size_t> downloaded(ranks), uploaded(ranks);
  testing::on_inproc_ranks(ranks, [&](int r, ProcessGroup& group) {
    const auto mine = rank_values(r, slice);
    auto placed = [&](auto garbage) {
      std::vector<decltype(garbage)> v(slice * ranks, garbage);
      for (size_t i = 0; i < slice; ++i) v[size_t(r) * slice + i] = decltype(garbage)(mine[i]);
      return v;
    };
    std::vector<float> plain = placed(-9.0f), staged = placed(-9.0f);
    std::vector<Bf16> staged16(slice * ranks, to_bf16(-9.0f));
    for (size_t i = 0; i < slice; ++i) staged16[size_t(r) * slice + i] = to_bf16(mine[i]);
    HostStagedCollectives(group, nullptr).all_gather_async(Buffer(std::span(plain)))->wait();
    CountingMemory device;
    HostStagedCollectives through_host(group, &device);
    size_t down = 0;
    DeviceWorkHandle a = through_host.all_gather_async(Buffer(std::span(staged)));
    DeviceWorkHandle b = through_host.all_gather_async(Buffer(std::span(staged16)));
    b->wait();
    a->wait();
    down = device.downloads;
    on_host[size_t(r)] = plain;
    gathered[size_t(r)] = staged;
    gathered16[size_t(r)] = staged16;
    downloaded[size_t(r)] = down;
    uploaded[size_t(r)] = device.uploaded_bytes;
    EXPECT_THROW(through_host.all_gather_async(Buffer(std::span(staged).subspan(0, 3 * slice - 1))), CommError);
  });
  for (int r = 0; r < ranks; ++r) {
    for (int from = 0; from < ranks; ++from) {
      const auto theirs = rank_values(from, slice);
      for (size_t i = 0; i < slice; ++i) {
        ASSERT_EQ(gathered[size_t(r)][size_t(from) * slice + i], theirs[i]) << r << " from " << from;
        ASSERT_EQ(gathered16[size_t(r)][size_t(from) * slice + i].bits, to_bf16(theirs[i]).bits);
      }
    }
    EXPECT_EQ(on_host[size_t(r)], gathered[size_t(r)]);
    EXPECT_EQ(downloaded[size_t(r)], 2);
    EXPECT_EQ(uploaded[size_t(r)], slice * ranks * (sizeof(float) + sizeof(Bf16)));
  }
}

TEST(HostStagedCollectives, ExchangesWithNeighboursBothWaysAtOnce) {
  // A pipeline's steady state on 3 ranks in a ring: each rank sends two
  // buffers (fp32, then bf16 as the wire sends them) to the next and
  // receives two from the previous in one exchange; every send goes down
  // once, every receive comes up once, in order per peer.
  const int ranks = 3;
  const size_t n = 513;
  std::vector<std::vector<float>> first(ranks), second(ranks);
  std::vector<std::vector<Bf16>> half(ranks);
  std::vector<int> downloads(ranks), uploads(ranks);
  testing::on_inproc_ranks(ranks, [&](int r, ProcessGroup& group) {
    const int next = (r + 1) % ranks, previous = (r + ranks - 1) % ranks;
    std::vector<float> a = rank_values(r, n), b = rank_values(r + 10, n);
    std::vector<float> got_a(n, -1.0f), got_b(n, -1.0f);
    CountingMemory device;
    HostStagedCollectives through_host(group, &device);
    through_host
        .exchange_async({{next, ConstBuffer(std::span(a))}, {next, ConstBuffer(std::span(b))}},
                        {{previous, Buffer(std::span(got_a))}, {previous, Buffer(std::span(got_b))}})
        ->wait();
    std::vector<Bf16> a16, got16(n);
    for (float x : a) a16.push_back(to_bf16(x));
    through_host.exchange_async({{next, ConstBuffer(std::span(a16))}}, {{previous, Buffer(std::span(got16))}})->wait();
    first[size_t(r)] = got_a;
    second[size_t(r)] = got_b;
    half[size_t(r)] = got16;
    downloads[size_t(r)] = device.downloads;
    uploads[size_t(r)] = device.uploads;
    // On the host (no device) the values themselves travel.
    std::vector<float> direct(n, -1.0f);
    HostStagedCollectives(group, nullptr)
        .exchange_async({{next, ConstBuffer(std::span(a))}}, {{previous, Buffer(std::span(direct))}})
        ->wait();
    EXPECT_EQ(direct, rank_values(previous, n));
  });
  for (int r = 0; r < ranks; ++r) {
    const int previous = (r + ranks - 1) % ranks;
    EXPECT_EQ(first[size_t(r)], rank_values(previous, n)) << r;
    EXPECT_EQ(second[size_t(r)], rank_values(previous + 10, n)) << r;
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(half[size_t(r)][i].bits, to_bf16(rank_values(previous, n)[i]).bits);
    EXPECT_EQ(downloads[size_t(r)], 3);
    EXPECT_EQ(uploads[size_t(r)], 3);
  }
}

TEST(HostStagedCollectives, KeepsItsScratchBetweenStepsAndBroadcastsRankZeros) {
  testing::on_inproc_ranks(2, [&](int r, ProcessGroup& group) {
    CountingMemory device;
    HostStagedCollectives collectives(group, &device);
    std::vector<float> bucket = rank_values(r, 5000), params = rank_values(r, 3000);
    auto& tracker = MemoryTracker::global();
    size_t after_first_step = 0;
    for (int step = 0; step < 3; ++step) {
      collectives.all_reduce_async(Buffer(std::span(bucket)), ReduceKind::Sum)->wait();
      if (step == 0) after_first_step = tracker.current(MemoryKind::Communication);
    }
    // Threads share the tracker: each rank's scratch was made in step 0
    // only, so no step after it adds communication bytes.
    group.barrier();
    EXPECT_LE(tracker.current(MemoryKind::Communication), after_first_step + 5000 * sizeof(float));
    collectives.broadcast(Buffer(std::span(params)), 0);
    EXPECT_EQ(params, rank_values(0, 3000));
  });
}

// A device with staging memory of its own (a GPU's page-locked host
// memory): the scratch comes from there, and the bits are the same.
class StagingDevice final : public DeviceAllocator {
 public:
  void* allocate(size_t bytes) override { return memory.allocate(bytes); }
  void release(void* p) noexcept override { memory.release(p); }
  void zero(void* p, size_t bytes) override { memory.zero(p, bytes); }
  void upload(void* dst, const void* src, size_t bytes) override { memory.upload(dst, src, bytes); }
  void download(void* dst, const void* src, size_t bytes) override { memory.download(dst, src, bytes); }
  std::string name() const override { return "staging device"; }
  DeviceAllocator* staging_memory() override { return &staging; }
  CountingMemory memory;
  class CountingStaging final : public DeviceAllocator {
   public:
    void* allocate(size_t bytes) override {
      ++allocations;
      return std::malloc(bytes);
    }
    void release(void* p) noexcept override { std::free(p); }
    void zero(void* p, size_t bytes) override { std::memset(p, 0, bytes); }
    void upload(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
    void download(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
    std::string name() const override { return "counting staging"; }
    MemoryTracker& tracker() override { return MemoryTracker::global(); }
    int allocations = 0;
  } staging;
};

TEST(HostStagedCollectives, StagesInTheDevicesStagingMemory) {
  const size_t n = 4001;
  std::vector<std::vector<float>> plain(2), staged(2);
  std::vector<int> allocations(2);
  testing::on_inproc_ranks(2, [&](int r, ProcessGroup& group) {
    plain[size_t(r)] = staged[size_t(r)] = rank_values(r, n);
    HostStagedCollectives on_host(group, nullptr);
    on_host.all_reduce_async(Buffer(std::span(plain[size_t(r)])), ReduceKind::Avg)->wait();
    StagingDevice device;
    HostStagedCollectives through_host(group, &device);
    for (int step = 0; step < 3; ++step) {
      if (step > 0) staged[size_t(r)] = rank_values(r, n);
      through_host.all_reduce_async(Buffer(std::span(staged[size_t(r)])), ReduceKind::Avg)->wait();
    }
    allocations[size_t(r)] = device.staging.allocations;
    EXPECT_EQ(device.memory.downloads, 3);
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(0, std::memcmp(plain[size_t(r)].data(), staged[size_t(r)].data(), n * sizeof(float))) << r;
    EXPECT_EQ(allocations[size_t(r)], 1) << "rank " << r << ": one scratch, from the staging memory, kept";
  }
}

TEST(HostStagedCollectives, AWorkDroppedUnwaitedLetsItsTransferFinish) {
  testing::on_inproc_ranks(2, [&](int r, ProcessGroup& group) {
    CountingMemory device;
    HostStagedCollectives collectives(group, &device);
    std::vector<float> bucket = rank_values(r, 20000);
    { DeviceWorkHandle dropped = collectives.all_reduce_async(Buffer(std::span(bucket)), ReduceKind::Sum); }
    EXPECT_EQ(device.uploads, 0) << "an abandoned step's result does not reach the device";
    collectives.all_reduce_async(Buffer(std::span(bucket)), ReduceKind::Sum)->wait();  // the group still works
    EXPECT_EQ(device.uploads, 1);
  });
}

}  // namespace
}  // namespace meshtrain::comm
