#include "meshtrain/comm/mesh/mesh_groups.hpp"

#include <numeric>

#include "meshtrain/core/error.hpp"

namespace meshtrain::comm {

ProcessGroup& MeshGroups::operator[](MeshAxis a) {
  if (!axis[size_t(a)])
    throw CommError(std::string("MeshGroups: no ") + mesh_axis_name(a) + " group was cut (one way along the axis)");
  return *axis[size_t(a)];
}

MeshGroups mesh_groups(const DeviceMesh& mesh, const MeshChannels& channels) {
  if (!channels.main) throw CommError("mesh_groups: no communicator given");
  const int rank = channels.main->rank();
  if (rank >= mesh.workers())
    throw CommError("mesh_groups: rank " + std::to_string(rank) + " is not a worker of the mesh " + mesh.describe());
  for (MeshAxis a : kMeshAxes)
    if (channels[a]->rank() != rank || channels[a]->size() < mesh.workers())
      throw CommError(std::string("mesh_groups: the ") + mesh_axis_name(a) + " channel is rank " +
                      std::to_string(channels[a]->rank()) + " of " + std::to_string(channels[a]->size()) +
                      ", not rank " + std::to_string(rank) + " of the mesh " + mesh.describe());
  const auto cut = [&](MeshAxis a, const char* name) {
    return std::make_unique<ProcessGroup>(channels[a], mesh.group_ranks(a, rank), name);
  };
  // Made in this order on every worker: the flight recorder numbers the
  // groups as they register (comm/flight/flight_recorder.hpp).
  MeshGroups g;
  std::vector<int> workers(static_cast<size_t>(mesh.workers()));
  std::iota(workers.begin(), workers.end(), 0);
  g.all = std::make_unique<ProcessGroup>(channels.main, std::move(workers), "all");
  g.axis[size_t(MeshAxis::Data)] = cut(MeshAxis::Data, "data");
  if (mesh.size(MeshAxis::Tensor) > 1) g.axis[size_t(MeshAxis::Tensor)] = cut(MeshAxis::Tensor, "tensor");
  if (mesh.size(MeshAxis::Expert) > 1) {
    g.axis[size_t(MeshAxis::Expert)] = cut(MeshAxis::Expert, "expert");
    g.expert_data = std::make_unique<ProcessGroup>(channels.main, mesh.expert_data_ranks(rank), "expert_data");
  }
  if (mesh.size(MeshAxis::Pipeline) > 1) {
    g.axis[size_t(MeshAxis::Pipeline)] = cut(MeshAxis::Pipeline, "pipeline");
    const std::span<const int> stages = g.axis[size_t(MeshAxis::Pipeline)]->members();
    if (rank == stages.front() || rank == stages.back())
      g.embedding = std::make_unique<ProcessGroup>(channels[MeshAxis::Pipeline],
                                                   std::vector<int>{stages.front(), stages.back()}, "embedding");
  }
  return g;
}

}  // namespace meshtrain::comm
