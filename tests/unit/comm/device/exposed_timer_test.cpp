// The overlap report's exposed time (comm/device/exposed_timer.hpp): where
// the collectives mark the compute stream (NCCL), the latest work's end
// after the mark, as the device's events tell it, whatever the host did
// meanwhile; where they do not (host-staged, whose waits block the host),
// the host's own time.
#include "meshtrain/comm/device/exposed_timer.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace meshtrain::comm {
namespace {

// A work whose end is `after_s` seconds past any mark.
class EndedWork final : public DeviceWork {
 public:
  explicit EndedWork(double after_s) : after_s_(after_s) {}
  void wait() override {}
  double busy_seconds() const override { return 0.01; }
  double seconds_after(const DeviceMark&) const override { return after_s_; }

 private:
  double after_s_;
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

TEST(ExposedTimer, OnTheDeviceTheLatestEndAfterTheMarkWhateverTheHostDid) {
  MarkingCollectives nccl_like(true);
  ExposedTimer exposed(&nccl_like);
  std::this_thread::sleep_for(std::chrono::milliseconds(30));  // the host's time does not count
  for (double end : {0.002, 0.005, 0.0, 0.001}) exposed.waited(EndedWork(end));
  EXPECT_DOUBLE_EQ(exposed.seconds(), 0.005);
}

TEST(ExposedTimer, WithoutMarksTheHostsWaitingTime) {
  MarkingCollectives staged_like(false);
  for (DeviceCollectives* collectives :
       {static_cast<DeviceCollectives*>(&staged_like), static_cast<DeviceCollectives*>(nullptr)}) {
    ExposedTimer exposed(collectives);
    exposed.waited(EndedWork(5.0));  // a device's answer is not asked for
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_GE(exposed.seconds(), 0.02);
    EXPECT_LT(exposed.seconds(), 5.0);
  }
}

}  // namespace
}  // namespace meshtrain::comm
