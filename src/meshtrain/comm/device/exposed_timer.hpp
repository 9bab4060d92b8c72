#pragma once
// How long a step's communication held up its compute (the overlap report's
// exposed time; data parallelism's gradient buckets, ZeRO's reduce-scatters).
#include <chrono>
#include <memory>

#include "meshtrain/comm/device/device_collectives.hpp"

namespace meshtrain::comm {

// The overlap report's exposed time of works waited for one after another:
// from the mark on the compute stream to the latest work's end, read from
// the device's events where the collectives give marks (NCCL), else the
// host's time from construction until seconds() (host-staged waits block).
class ExposedTimer {
 public:
  // Marks now: after the works are issued, before they are waited for.
  // `collectives` may be null (nothing to wait for).
  explicit ExposedTimer(DeviceCollectives* collectives);
  // After `work`'s wait().
  void waited(const DeviceWork& work);
  double seconds() const;

 private:
  std::shared_ptr<DeviceMark> mark_;
  double device_s_ = 0;
  std::chrono::steady_clock::time_point host_start_;
};

}  // namespace meshtrain::comm
