#pragma once
// What carries a job's device collectives (parallel.device_collectives):
// Auto takes NCCL where every worker has a GPU of its own and libnccl.so.2
// loads, else the host-staged path (device_collectives_choice.hpp);
// Nccl insists (ConfigError where it cannot); HostStaged never uses NCCL.
#include <span>

#include "meshtrain/core/enum_names.hpp"

namespace meshtrain::comm {

enum class DeviceCollectivesKind { Auto, Nccl, HostStaged };
inline constexpr EnumName<DeviceCollectivesKind> kDeviceCollectivesKindNames[] = {
    {DeviceCollectivesKind::Auto, "auto"},
    {DeviceCollectivesKind::Nccl, "nccl"},
    {DeviceCollectivesKind::HostStaged, "host_staged"}};
constexpr std::span<const EnumName<DeviceCollectivesKind>> enum_names(DeviceCollectivesKind) {
  return kDeviceCollectivesKindNames;
}

}  // namespace meshtrain::comm
