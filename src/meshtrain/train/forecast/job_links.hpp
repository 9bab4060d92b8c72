#pragma once
// Which link each process group of a forecast job (job_forecast.hpp) talks
// over. The workers split evenly over HostLayout::hosts hosts in rank
// order (consecutive ranks on a host, as launchers place them), so a mesh
// group (comm/mesh/device_mesh.hpp) of `members` ranks `stride` apart
// crosses hosts when stride x (members - 1) reaches past a host's ranks.
// A group inside a host gets the host's link as measured; one that crosses
// gets the host's network link, shared by the groups crossing it at once
// (plan/link_time.hpp's rule): a collective with m members per host (a
// ring crosses each host's link once) m / ranks-per-host of it, one that
// every rank runs on its own (sends, all-to-alls) 1 / ranks-per-host.
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "meshtrain/comm/collectives/cost_model.hpp"
#include "meshtrain/train/forecast/job_forecast.hpp"

namespace meshtrain {

class JobLinks {
 public:
  // `intra` measures the in-host link (called once, when first needed).
  // Throws ConfigError when the workers do not split evenly over the hosts
  // or a multi-host layout has no network bandwidth.
  JobLinks(const HostLayout& hosts, int workers, std::function<comm::CostTable()> intra);

  // The link of a group of `members` ranks `stride` apart; `every_rank`:
  // each rank exchanges on its own (sends, all-to-all). A group that
  // crosses hosts is named in `crossing` (once).
  comm::CostTable group(const char* name, int stride, int members, bool every_rank = false);
  // The same for a mesh group given by its ranks (DeviceMesh::group_ranks,
  // evenly spaced).
  comm::CostTable group(const char* name, std::span<const int> ranks, bool every_rank = false);
  int ranks_per_host() const { return per_host_; }
  const std::vector<std::string>& crossing() const { return crossing_; }

 private:
  const comm::CostTable& intra();

  HostLayout hosts_;
  int per_host_;
  std::function<comm::CostTable()> measure_;
  bool measured_ = false;
  comm::CostTable intra_;
  std::vector<std::string> crossing_;
};

}  // namespace meshtrain
