#include "meshtrain/plan/hardware.hpp"

#include <algorithm>
#include <cctype>

#include "meshtrain/core/error.hpp"

namespace meshtrain::plan {
namespace {

constexpr double kGB = 1e9, kTFLOPS = 1e12, kUs = 1e-6;

// docs/planner.md names the source of every figure. FLOP/s are dense (the
// vendors' headline figures with sparsity halved); link bandwidths are per
// direction (NVLink's published figures are both directions together).
// TPUs have no published FP32 peak: FP32 matrix products run as several
// BF16 passes, taken here as a quarter of the BF16 peak.
std::vector<DeviceProfile> make_devices() {
  return {
      {"a100-40gb", 40 * kGB, 312 * kTFLOPS, 19.5 * kTFLOPS, "nvlink3", "ethernet-100g", 8},
      {"a100-80gb", 80 * kGB, 312 * kTFLOPS, 19.5 * kTFLOPS, "nvlink3", "ethernet-100g", 8},
      {"h100", 80 * kGB, 989 * kTFLOPS, 67 * kTFLOPS, "nvlink4", "gpudirect-tcpxo", 8},
      {"h200", 141 * kGB, 989 * kTFLOPS, 67 * kTFLOPS, "nvlink4", "gpudirect-rdma", 8},
      {"b200", 180 * kGB, 2250 * kTFLOPS, 75 * kTFLOPS, "nvlink5", "gpudirect-rdma", 8},
      {"tpu-v4", 32 * 1.073741824 * kGB, 275 * kTFLOPS, 275 / 4.0 * kTFLOPS, "ici-v4", "ici-v4", 4},
      {"tpu-v5e", 16 * kGB, 197 * kTFLOPS, 197 / 4.0 * kTFLOPS, "ici-v5e", "ici-v5e", 8},
  };
}

// Latencies are assumed (no vendor publishes a small-message figure for
// these paths); docs/planner.md gives the reasoning for each.
std::vector<LinkProfile> make_links() {
  return {
      {"nvlink3", 300 * kGB, 3 * kUs, false},
      {"nvlink4", 450 * kGB, 3 * kUs, false},
      {"nvlink5", 900 * kGB, 3 * kUs, false},
      {"pcie4", 31.5 * kGB, 2 * kUs, false},
      {"pcie5", 63 * kGB, 2 * kUs, false},
      {"ici-v4", 270 * kGB, 5 * kUs, false},
      {"ici-v5e", 200 * kGB, 5 * kUs, false},
      {"gpudirect-tcpx", 100 * kGB, 30 * kUs, true},
      {"gpudirect-tcpxo", 200 * kGB, 25 * kUs, true},
      {"gpudirect-rdma", 400 * kGB, 5 * kUs, true},
      {"infiniband-ndr", 400 * kGB, 5 * kUs, true},  // 8 NDR ports of 400 Gbit/s, one per GPU
      {"ethernet-100g", 12.5 * kGB, 30 * kUs, true},
      {"ethernet-200g", 25 * kGB, 30 * kUs, true},
  };
}

bool same_name(std::string_view a, std::string_view b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                    [](char x, char y) { return std::tolower((unsigned char)x) == std::tolower((unsigned char)y); });
}

template <typename Profile>
const Profile& find_profile(const std::vector<Profile>& profiles, std::string_view name, const char* what) {
  for (const Profile& p : profiles)
    if (same_name(p.name, name)) return p;
  std::string known;
  for (const Profile& p : profiles) known += (known.empty() ? "" : ", ") + p.name;
  throw ConfigError("unknown " + std::string(what) + " '" + std::string(name) + "' (known: " + known + ")");
}

}  // namespace

const std::vector<DeviceProfile>& device_profiles() {
  static const std::vector<DeviceProfile> devices = make_devices();
  return devices;
}

const std::vector<LinkProfile>& link_profiles() {
  static const std::vector<LinkProfile> links = make_links();
  return links;
}

const DeviceProfile& find_device(std::string_view name) { return find_profile(device_profiles(), name, "device"); }

AssumedLinks links_of_gpu(std::string_view gpu_name) {
  std::string lower(gpu_name);
  for (char& c : lower) c = char(std::tolower((unsigned char)c));
  const auto has = [&](std::string_view part) { return lower.find(part) != std::string::npos; };
  // The family's profile: the A100s share their links, so either serves.
  const char* family = has("h200") ? "h200" : has("h100") ? "h100" : has("b200") ? "b200" : has("a100") ? "a100-80gb"
                                                                                                       : nullptr;
  const std::string card = gpu_name.empty() ? std::string("this device") : "the " + std::string(gpu_name);
  if (!family)
    return {&find_link("pcie4"), &find_link("ethernet-100g"),
            card + ": no profile of its family, so PCIe 4 and 100 Gbit/s Ethernet (name them with "
                   "--hardware.intra_link and --hardware.inter_link)"};
  const DeviceProfile& profile = find_device(family);
  if (has("pcie"))  // a PCIe card: no NVLink assumed between the cards
    return {&find_link(std::string(family) == "a100-80gb" ? "pcie4" : "pcie5"), &find_link(profile.inter_link),
            card + ": a PCIe card of the " + profile.name + " family, so no NVLink"};
  return {&find_link(profile.intra_link), &find_link(profile.inter_link),
          card + "'s family (" + profile.name + ")"};
}
const LinkProfile& find_link(std::string_view name) { return find_profile(link_profiles(), name, "interconnect"); }

}  // namespace meshtrain::plan
