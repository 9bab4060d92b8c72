#include "meshtrain/comm/mesh/mesh_groups.hpp"

#include "meshtrain/core/error.hpp"

namespace meshtrain::comm {

ProcessGroup& MeshGroups::operator[](MeshAxis axis) {
  switch (axis) {
    case MeshAxis::Data: return dp;
    case MeshAxis::Tensor: return tp;
    case MeshAxis::Pipeline: return pp;
    case MeshAxis::Expert: return ep;
  }
  return dp;
}

ProcessGroup axis_group(const DeviceMesh& mesh, MeshAxis axis, std::shared_ptr<Communicator> comm) {
  if (!comm) throw CommError("axis_group: no communicator given");
  if (comm->rank() >= mesh.workers())
    throw CommError("axis_group: rank " + std::to_string(comm->rank()) + " is not a worker of the mesh " +
                    mesh.describe());
  return ProcessGroup(comm, mesh.group_ranks(axis, comm->rank()));
}

MeshGroups mesh_groups(const DeviceMesh& mesh, std::shared_ptr<Communicator> comm) {
  return MeshGroups{axis_group(mesh, MeshAxis::Data, comm), axis_group(mesh, MeshAxis::Tensor, comm),
                    axis_group(mesh, MeshAxis::Pipeline, comm), axis_group(mesh, MeshAxis::Expert, comm)};
}

}  // namespace meshtrain::comm
