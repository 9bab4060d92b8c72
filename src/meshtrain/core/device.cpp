#include "meshtrain/core/device.hpp"

#include <charconv>

#include "meshtrain/core/error.hpp"

namespace meshtrain {

DeviceRequest parse_device(std::string_view text) {
  if (text == "cpu") return {};
  if (text == "cuda") return {DeviceKind::Cuda, 0, false};
  if (text == "cpu-guarded") return {DeviceKind::GuardedCpu, 0, false};
  constexpr std::string_view prefix = "cuda:";
  if (text.starts_with(prefix)) {
    const std::string_view digits = text.substr(prefix.size());
    int index = -1;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
    if (ec == std::errc() && end == digits.data() + digits.size() && !digits.empty() && index >= 0 && index < 1024)
      return {DeviceKind::Cuda, index, true};
  }
  throw ConfigError("device \"" + std::string(text) + "\" is not one of \"cpu\", \"cuda\", \"cuda:N\" (N from 0) or \"cpu-guarded\"");
}

Device resolve_device(const DeviceRequest& request, int local_rank) {
  if (request.kind != DeviceKind::Cuda) return {request.kind, 0};
  return {DeviceKind::Cuda, request.index_given ? request.index : local_rank};
}

std::string device_name(const Device& device) {
  switch (device.kind) {
    case DeviceKind::Cpu: return "cpu";
    case DeviceKind::GuardedCpu: return "cpu-guarded";
    case DeviceKind::Cuda: break;
  }
  return "cuda:" + std::to_string(device.index);
}

}  // namespace meshtrain
