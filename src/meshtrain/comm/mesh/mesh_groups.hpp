#pragma once
// Process groups cut from a device mesh: one call gives a worker its dp, tp,
// pp and ep groups. Every worker must create them (each is only a view; no
// messages are exchanged), and group rank == the rank's coordinate on the
// axis. The workers are the communicator's first mesh.workers() ranks;
// reducers and servers after them are outside the mesh.
#include <memory>

#include "meshtrain/comm/group/process_group.hpp"
#include "meshtrain/comm/mesh/device_mesh.hpp"

namespace meshtrain::comm {

struct MeshGroups {
  ProcessGroup dp, tp, pp, ep;
  ProcessGroup& operator[](MeshAxis axis);
  const ProcessGroup& operator[](MeshAxis axis) const { return const_cast<MeshGroups&>(*this)[axis]; }
};

// The group along `axis` containing this process (comm->rank()).
ProcessGroup axis_group(const DeviceMesh& mesh, MeshAxis axis, std::shared_ptr<Communicator> comm);
MeshGroups mesh_groups(const DeviceMesh& mesh, std::shared_ptr<Communicator> comm);

}  // namespace meshtrain::comm
