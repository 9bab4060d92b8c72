#include "meshtrain/comm/device/exposed_timer.hpp"

#include <algorithm>

#include "meshtrain/core/stopwatch.hpp"

namespace meshtrain::comm {

ExposedTimer::ExposedTimer(DeviceCollectives* collectives)
    : mark_(collectives ? collectives->mark_compute() : nullptr), host_start_(std::chrono::steady_clock::now()) {}

void ExposedTimer::waited(const DeviceWork& work) {
  if (mark_) device_s_ = std::max(device_s_, work.seconds_after(*mark_));
}

double ExposedTimer::seconds() const { return mark_ ? device_s_ : seconds_since(host_start_); }

}  // namespace meshtrain::comm
