#include "meshtrain/comm/device/overlap_ledger.hpp"

#include <algorithm>

#include "meshtrain/core/error.hpp"
#include "meshtrain/core/stopwatch.hpp"

namespace meshtrain::comm {

void OverlapLedger::close_host_group() {
  settled_.exposed_s += host_exposed_s_;
  host_exposed_s_ = 0;
  host_group_ = false;
}

void OverlapLedger::begin_waits(DeviceCollectives& collectives) {
  if (!recording_) return;
  close_host_group();
  group_open_ = true;
  if (auto mark = collectives.mark_compute()) {
    device_groups_.push_back({std::move(mark), {}});
    return;
  }
  host_group_ = true;
  host_start_ = std::chrono::steady_clock::now();
}

void OverlapLedger::waited(DeviceWorkHandle work) {
  if (!recording_ || !work) return;
  if (!group_open_) throw Error("OverlapLedger: a work was waited for outside any group (begin_waits)");
  if (host_group_) {
    host_exposed_s_ = seconds_since(host_start_);
    settled_.busy_s += work->busy_seconds();
    return;  // the work goes: a host-staged one gives its buffers back
  }
  device_groups_.back().works.push_back(std::move(work));
}

CommTime OverlapLedger::settle() {
  close_host_group();
  for (const DeviceGroup& group : device_groups_) {
    double exposed = 0;
    for (const auto& work : group.works) {
      exposed = std::max(exposed, work->seconds_after(*group.mark));
      settled_.busy_s += work->busy_seconds();
    }
    settled_.exposed_s += exposed;
  }
  device_groups_.clear();
  group_open_ = false;
  const CommTime step = settled_;
  settled_ = {};
  return step;
}

}  // namespace meshtrain::comm
