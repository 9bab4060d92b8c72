// The overlap report's ledger (comm/device/overlap_ledger.hpp): where the
// collectives mark the compute stream (NCCL), each group of waits costs the
// latest end after its mark, as the device's events tell it, whatever the
// host did meanwhile, and the events are read once, at settle(); where they
// do not (host-staged, whose waits block the host), the host's own time
// from the group's start to its last wait. Groups add; busy time adds over
// every work; settle() starts over.
#include "meshtrain/comm/device/overlap_ledger.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <thread>

namespace meshtrain::comm {
namespace {

// A work whose end is `after_s` seconds past any mark, and that counts how
// often its device times were read.
class EndedWork final : public DeviceWork {
 public:
  EndedWork(double after_s, int* reads) : after_s_(after_s), reads_(reads) {}
  void wait() override {}
  double busy_seconds() const override { return 0.25; }
  double seconds_after(const DeviceMark&) const override {
    ++*reads_;
    return after_s_;
  }

 private:
  double after_s_;
  int* reads_;
};

// Collectives that mark the compute stream (what NCCL's do); they carry no operation here.
class MarkingCollectives final : public DeviceCollectives {
 public:
  explicit MarkingCollectives(bool marks) : marks_(marks) {}
  int size() const override { return 1; }
  int rank() const override { return 0; }
  DeviceWorkHandle all_reduce_async(Buffer, ReduceKind) override { return nullptr; }
  DeviceWorkHandle reduce_scatter_async(Buffer, Buffer, ReduceKind) override { return nullptr; }
  DeviceWorkHandle all_gather_async(Buffer) override { return nullptr; }
  DeviceWorkHandle exchange_async(std::vector<DeviceSend>, std::vector<DeviceRecv>) override { return nullptr; }
  void broadcast(Buffer, int) override {}
  std::shared_ptr<DeviceMark> mark_compute() override { return marks_ ? std::make_shared<DeviceMark>() : nullptr; }

 private:
  bool marks_;
};

TEST(OverlapLedger, OnTheDeviceEachGroupCostsItsLatestEndAfterItsMarkReadOnlyAtSettle) {
  MarkingCollectives nccl_like(true);
  OverlapLedger ledger;
  int reads = 0;
  ledger.begin_waits(nccl_like);
  std::this_thread::sleep_for(std::chrono::milliseconds(30));  // the host's time does not count
  for (double end : {0.002, 0.005, 0.0, 0.001}) ledger.waited(std::make_unique<EndedWork>(end, &reads));
  ledger.begin_waits(nccl_like);
  ledger.waited(std::make_unique<EndedWork>(0.003, &reads));
  EXPECT_EQ(reads, 0);  // no host wait for the device before settle()
  const CommTime step = ledger.settle();
  EXPECT_EQ(reads, 5);
  EXPECT_DOUBLE_EQ(step.exposed_s, 0.005 + 0.003);
  EXPECT_DOUBLE_EQ(step.busy_s, 5 * 0.25);
  const CommTime next = ledger.settle();  // starts over
  EXPECT_EQ(next.busy_s, 0);
  EXPECT_EQ(next.exposed_s, 0);
}

TEST(OverlapLedger, WithoutMarksEachGroupCostsTheHostsTimeToItsLastWait) {
  MarkingCollectives staged_like(false);
  OverlapLedger ledger;
  int reads = 0;
  const auto start = std::chrono::steady_clock::now();
  ledger.begin_waits(staged_like);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ledger.waited(std::make_unique<EndedWork>(5.0, &reads));  // a device's answer is not asked for
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // after the group's last wait: not counted
  ledger.begin_waits(staged_like);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ledger.waited(std::make_unique<EndedWork>(5.0, &reads));
  const CommTime step = ledger.settle();
  const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(reads, 0);
  EXPECT_GE(step.exposed_s, 0.04);
  // The 200 ms between the groups (at least that, however loaded the machine) are left out.
  EXPECT_LE(step.exposed_s, total - 0.2);
  EXPECT_DOUBLE_EQ(step.busy_s, 0.5);
}

TEST(OverlapLedger, WhileNotRecordingWaitsAreDroppedUnread) {
  MarkingCollectives nccl_like(true);
  OverlapLedger ledger;
  int reads = 0;
  ledger.set_recording(false);
  ledger.begin_waits(nccl_like);
  ledger.waited(std::make_unique<EndedWork>(0.5, &reads));
  ledger.set_recording(true);
  ledger.begin_waits(nccl_like);
  ledger.waited(std::make_unique<EndedWork>(0.002, &reads));
  const CommTime step = ledger.settle();
  EXPECT_EQ(reads, 1);
  EXPECT_DOUBLE_EQ(step.exposed_s, 0.002);
  EXPECT_DOUBLE_EQ(step.busy_s, 0.25);
}

TEST(OverlapLedger, AWaitOutsideAnyGroupIsRefused) {
  OverlapLedger ledger;
  int reads = 0;
  EXPECT_THROW(ledger.waited(std::make_unique<EndedWork>(0.0, &reads)), Error);
  MarkingCollectives staged_like(false);
  ledger.begin_waits(staged_like);
  ledger.settle();
  EXPECT_THROW(ledger.waited(std::make_unique<EndedWork>(0.0, &reads)), Error);
}

}  // namespace
}  // namespace meshtrain::comm
