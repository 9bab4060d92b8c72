#include "meshtrain/comm/mesh/device_mesh.hpp"

#include "meshtrain/core/error.hpp"

namespace meshtrain::comm {
namespace {

std::string factors(const MeshShape& s) {
  return "dp=" + std::to_string(s.dp) + " x tp=" + std::to_string(s.tp) + " x pp=" + std::to_string(s.pp) +
         " x ep=" + std::to_string(s.ep);
}

int& axis_ref(MeshShape& s, MeshAxis axis) {
  switch (axis) {
    case MeshAxis::Data: return s.dp;
    case MeshAxis::Tensor: return s.tp;
    case MeshAxis::Pipeline: return s.pp;
    case MeshAxis::Expert: return s.ep;
  }
  return s.dp;
}

}  // namespace

const char* mesh_axis_name(MeshAxis axis) {
  switch (axis) {
    case MeshAxis::Data: return "dp";
    case MeshAxis::Tensor: return "tp";
    case MeshAxis::Pipeline: return "pp";
    case MeshAxis::Expert: return "ep";
  }
  return "?";
}

int MeshCoord::operator[](MeshAxis axis) const { return const_cast<MeshCoord&>(*this)[axis]; }

int& MeshCoord::operator[](MeshAxis axis) {
  switch (axis) {
    case MeshAxis::Data: return dp;
    case MeshAxis::Tensor: return tp;
    case MeshAxis::Pipeline: return pp;
    case MeshAxis::Expert: return ep;
  }
  return dp;
}

DeviceMesh::DeviceMesh(MeshShape shape, int world_size) : shape_(shape), world_size_(world_size) {
  if (world_size < 1) throw ConfigError("device mesh: world size must be at least 1, got " + std::to_string(world_size));
  int rest_axes = 0;
  long long known = 1;
  for (MeshAxis axis : kMeshAxes) {
    const int size = axis_ref(shape_, axis);
    if (size == -1) {
      ++rest_axes;
    } else if (size < 1) {
      throw ConfigError("device mesh " + factors(shape) + ": " + mesh_axis_name(axis) + "=" + std::to_string(size) +
                        " must be at least 1 (or -1 for the rest of the world)");
    } else {
      known *= size;
    }
  }
  if (rest_axes > 1)
    throw ConfigError("device mesh " + factors(shape) + ": only one axis may be -1 (the rest of the world)");
  if (rest_axes == 1) {
    if (world_size % known != 0)
      throw ConfigError("device mesh " + factors(shape) + ": world size " + std::to_string(world_size) +
                        " is not divisible by the other axes' product " + std::to_string(known));
    for (MeshAxis axis : kMeshAxes)
      if (axis_ref(shape_, axis) == -1) axis_ref(shape_, axis) = int(world_size / known);
    known = world_size;
  }
  if (known != world_size)
    throw ConfigError("device mesh " + factors(shape_) + " = " + std::to_string(known) +
                      " ranks does not equal the world size " + std::to_string(world_size));
}

int DeviceMesh::size(MeshAxis axis) const { return axis_ref(const_cast<MeshShape&>(shape_), axis); }

void DeviceMesh::check_rank(int rank) const {
  if (rank < 0 || rank >= world_size_)
    throw ConfigError("device mesh " + describe() + ": rank " + std::to_string(rank) + " is outside the world");
}

MeshCoord DeviceMesh::coord(int rank) const {
  check_rank(rank);
  MeshCoord c;
  c.tp = rank % shape_.tp;
  rank /= shape_.tp;
  c.ep = rank % shape_.ep;
  rank /= shape_.ep;
  c.dp = rank % shape_.dp;
  c.pp = rank / shape_.dp;
  return c;
}

int DeviceMesh::rank_of(MeshCoord c) const {
  for (MeshAxis axis : kMeshAxes)
    if (c[axis] < 0 || c[axis] >= size(axis))
      throw ConfigError("device mesh " + describe() + ": coordinate " + mesh_axis_name(axis) + "=" +
                        std::to_string(c[axis]) + " is outside the axis");
  return ((c.pp * shape_.dp + c.dp) * shape_.ep + c.ep) * shape_.tp + c.tp;
}

std::vector<int> DeviceMesh::group_ranks(MeshAxis axis, int rank) const {
  MeshCoord c = coord(rank);
  std::vector<int> ranks;
  for (int i = 0; i < size(axis); ++i) {
    c[axis] = i;
    ranks.push_back(rank_of(c));
  }
  return ranks;
}

std::string DeviceMesh::describe() const { return factors(shape_) + " (" + std::to_string(world_size_) + " ranks)"; }

}  // namespace meshtrain::comm
