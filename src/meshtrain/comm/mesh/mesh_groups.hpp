#pragma once
// Process groups cut from a device mesh: the one place a job's groups are
// made (parallel/parallel_context.hpp cuts its worker's groups here, the
// tests theirs). One call gives a worker every group it belongs to. Every
// worker must make them (each is only a view; no messages are exchanged),
// and group rank == the rank's coordinate on the axis. The workers are the
// communicators' first mesh.workers() ranks; reducers and servers after them
// are outside the mesh.
#include <array>
#include <memory>

#include "meshtrain/comm/group/process_group.hpp"
#include "meshtrain/comm/mesh/device_mesh.hpp"

namespace meshtrain::comm {

// The communicators a worker's groups run on, indexed by MeshAxis: an axis
// may have a channel of its own (comm/bootstrap/connect.hpp), so its
// operations never queue behind another axis's; an axis without one runs
// on `main`, which spans every rank.
struct MeshChannels {
  std::shared_ptr<Communicator> main;
  std::array<std::shared_ptr<Communicator>, kMeshAxes.size()> own;
  const std::shared_ptr<Communicator>& operator[](MeshAxis axis) const {
    return own[size_t(axis)] ? own[size_t(axis)] : main;
  }
};

// A worker's groups. The data group is always cut; the tensor, pipeline and
// expert groups only where their axis has more than one way (null
// otherwise), each on its axis's channel. Beside the expert group, the data
// ranks holding the same experts (DeviceMesh::expert_data_ranks, on main);
// beside the pipeline group, on the first and the last stage only, their
// pair (which sums the tied embedding's gradient, on pp's channel).
struct MeshGroups {
  std::unique_ptr<ProcessGroup> all;  // every worker, on main (the lead's decisions)
  std::array<std::unique_ptr<ProcessGroup>, kMeshAxes.size()> axis;  // indexed by MeshAxis
  std::unique_ptr<ProcessGroup> expert_data, embedding;
  // The group along `axis`; throws CommError where that axis was not cut.
  ProcessGroup& operator[](MeshAxis axis);
  const ProcessGroup& operator[](MeshAxis a) const { return const_cast<MeshGroups&>(*this)[a]; }
  // The group along `axis`, or null.
  ProcessGroup* find(MeshAxis a) const { return axis[size_t(a)].get(); }
};

// Throws CommError when this process (channels.main->rank()) is not a
// worker of `mesh`, or an axis's channel does not span the mesh.
MeshGroups mesh_groups(const DeviceMesh& mesh, const MeshChannels& channels);
// Every axis on one communicator.
inline MeshGroups mesh_groups(const DeviceMesh& mesh, std::shared_ptr<Communicator> comm) {
  return mesh_groups(mesh, MeshChannels{.main = std::move(comm), .own = {}});
}

}  // namespace meshtrain::comm
