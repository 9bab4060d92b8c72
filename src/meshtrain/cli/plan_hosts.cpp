#include "meshtrain/cli/plan_hosts.hpp"

#include <cstdio>

#include "meshtrain/core/error.hpp"
#include "meshtrain/plan/hardware.hpp"
#include "meshtrain/plan/plan_keys.hpp"

namespace meshtrain::cli {
namespace {

std::string link_text(const plan::LinkProfile& link) {
  char text[128];
  std::snprintf(text, sizeof text, "%s (%.1f GB/s per direction, %.0f us)", link.name.c_str(),
                link.bandwidth_Bps / 1e9, link.latency_s * 1e6);
  return text;
}

}  // namespace

HostFlags take_host_flags(std::vector<std::string>& flags) {
  HostFlags given;
  HostLayout& hosts = given.hosts;
  std::vector<std::string> rest;
  plan::PlanValues values;
  for (const std::string& flag : flags) {
    if (flag.rfind("--hardware.", 0) != 0) {
      rest.push_back(flag);
      continue;
    }
    const std::string key = flag.substr(2, flag.find('=') - 2);
    if (key != "hardware.nodes" && key != "hardware.inter_link" && key != "hardware.inter_gb_per_s" &&
        key != "hardware.inter_latency_us" && key != "hardware.intra_link")
      throw ConfigError("plan --config: " + key + " is not a job's: the forecast measures this machine, and takes "
                        "only hardware.nodes, hardware.inter_link, hardware.inter_gb_per_s and "
                        "hardware.inter_latency_us (the hosts and their network) and, for workers on GPUs, "
                        "hardware.intra_link");
    plan::read_plan_flags({flag}, values);
  }
  flags = rest;
  const auto number = [&](const char* key) {
    const std::string& text = values.at(key).text;
    try {
      size_t used = 0;
      const double v = std::stod(text, &used);
      if (used == text.size() && v >= 0) return v;
    } catch (const std::exception&) {
    }
    throw ConfigError(std::string(key) + ": expected a number >= 0, got '" + text + "'");
  };
  if (values.count("hardware.nodes")) hosts.hosts = int(number("hardware.nodes"));
  if (values.count("hardware.inter_link")) {
    const plan::LinkProfile& link = plan::find_link(values.at("hardware.inter_link").text);
    hosts.inter_bytes_per_s = link.bandwidth_Bps;
    hosts.inter_latency_s = link.latency_s;
  }
  if (values.count("hardware.inter_gb_per_s")) hosts.inter_bytes_per_s = number("hardware.inter_gb_per_s") * 1e9;
  if (values.count("hardware.inter_latency_us")) hosts.inter_latency_s = number("hardware.inter_latency_us") * 1e-6;
  if (values.count("hardware.intra_link")) given.intra_link = plan::find_link(values.at("hardware.intra_link").text).name;
  given.inter_given = hosts.inter_bytes_per_s > 0;
  return given;
}

HostLayout with_device_links(HostFlags given, const OpenedDevice& opened) {
  HostLayout hosts = given.hosts;
  if (opened.device.is_cpu()) {
    if (!given.intra_link.empty())
      throw ConfigError("plan --config: hardware.intra_link is for workers on GPUs; on the CPU the forecast "
                        "measures this host's own link");
    return hosts;
  }
  const plan::AssumedLinks assumed = plan::links_of_gpu(opened.gpu_name);
  const plan::LinkProfile& intra = given.intra_link.empty() ? *assumed.intra : plan::find_link(given.intra_link);
  hosts.device_bytes_per_s = intra.bandwidth_Bps;
  hosts.device_latency_s = intra.latency_s;
  hosts.interconnect = link_text(intra) + " between a host's devices, " +
                       (given.intra_link.empty() ? "from " + assumed.source : std::string("as given"));
  if (hosts.hosts > 1) {
    if (!given.inter_given) {
      hosts.inter_bytes_per_s = assumed.inter->bandwidth_Bps;
      hosts.inter_latency_s = assumed.inter->latency_s;
      hosts.interconnect += "; " + link_text(*assumed.inter) + " per host between hosts, from " +
                            (given.intra_link.empty() ? std::string("the same") : assumed.source);
    } else {
      hosts.interconnect += "; between hosts, the network given";
    }
  }
  return hosts;
}

}  // namespace meshtrain::cli
