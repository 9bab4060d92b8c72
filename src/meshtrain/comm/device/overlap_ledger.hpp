#pragma once
// The overlap report's account of a step's communication (data
// parallelism's buckets; ZeRO's gathers and reduce-scatters): the time the
// transport spent on it (busy) and how long the compute waited for it
// (exposed).
//
// The compute waits in groups: one or more works waited for one after
// another, from a point where nothing else is left to run. A group's
// exposed time runs from that point to the latest end among its works:
// - where the collectives mark the compute stream (NCCL, whose wait() does
//   not block the host), the device's own interval from the mark to each
//   work's end event, read at settle(): the host waits for the device
//   there, once, instead of at every wait;
// - elsewhere (host-staged, whose wait() blocks the host), the host's time
//   from begin_waits() to the group's last wait.
#include <algorithm>
#include <chrono>
#include <memory>
#include <vector>

#include "meshtrain/comm/device/device_collectives.hpp"

namespace meshtrain::comm {

struct CommTime {
  double busy_s = 0;     // the transport's time on the works
  double exposed_s = 0;  // how long the compute waited for them
  CommTime& operator+=(const CommTime& other) {
    busy_s += other.busy_s;
    exposed_s += other.exposed_s;
    return *this;
  }
  // The share of the busy time the compute did not wait for (1 with none).
  double hidden_share() const { return busy_s > 0 ? 1.0 - std::min(1.0, exposed_s / busy_s) : 1.0; }
};

class OverlapLedger {
 public:
  // Opens a group: the compute has reached a point where it needs the works
  // waited for next. `collectives` gives the mark (those of the works).
  void begin_waits(DeviceCollectives& collectives);
  // After `work`'s wait(), in the open group. The ledger keeps a work whose
  // times are the device's until settle(); it reads the others now.
  void waited(DeviceWorkHandle work);
  // The busy and exposed seconds since the last settle(), and starts over.
  // Over NCCL the host waits here for the device's events: call it where
  // the step waits for the device anyway.
  CommTime settle();
  // Off: waits are not accounted (evaluation's); their works are dropped
  // unread.
  void set_recording(bool on) { recording_ = on; }

 private:
  struct DeviceGroup {
    std::shared_ptr<DeviceMark> mark;
    std::vector<DeviceWorkHandle> works;
  };
  void close_host_group();

  CommTime settled_;  // what the host already knows
  std::vector<DeviceGroup> device_groups_;
  bool recording_ = true;
  bool group_open_ = false;  // since the last settle()
  bool host_group_ = false;
  std::chrono::steady_clock::time_point host_start_;
  double host_exposed_s_ = 0;  // the open host group's, so far
};

}  // namespace meshtrain::comm
