#pragma once
// plan --config's hosts and the links between its workers: the plan's own
// hardware keys among the job's flags, and for workers on GPUs the links
// assumed between them (plan/hardware.hpp's links_of_gpu), which the
// report names.
#include <string>
#include <vector>

#include "meshtrain/train/forecast/job_forecast.hpp"
#include "meshtrain/train/loop/training_device.hpp"

namespace meshtrain::cli {

struct HostFlags {
  HostLayout hosts;
  std::string intra_link;  // a profile name; empty: the GPU family's
  bool inter_given = false;
};

// Takes --hardware.nodes=H and the network between the hosts
// (--hardware.inter_link=PROFILE and/or --hardware.inter_gb_per_s, per
// host and direction, and --hardware.inter_latency_us; default latency:
// the in-host link's, measured) and, for workers on GPUs,
// --hardware.intra_link=PROFILE out of `flags`; the rest override the job.
HostFlags take_host_flags(std::vector<std::string>& flags);

// The hosts as the forecast takes them on `opened`: on the CPU as given
// (its in-host link is measured; hardware.intra_link is refused); on GPUs
// with the link between a host's devices and, across hosts, the network
// assumed where none was given.
HostLayout with_device_links(HostFlags given, const OpenedDevice& opened);

}  // namespace meshtrain::cli
