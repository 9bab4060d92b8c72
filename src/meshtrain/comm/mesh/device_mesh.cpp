#include "meshtrain/comm/mesh/device_mesh.hpp"

#include "meshtrain/core/error.hpp"

namespace meshtrain::comm {
namespace {

std::string factors(const MeshShape& s) {
  return "pp=" + std::to_string(s.pp) + " x dp=" + std::to_string(s.dp) + " (ep=" + std::to_string(s.ep) +
         ") x tp=" + std::to_string(s.tp);
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

constexpr std::array<MeshAxis, 3> kProductAxes{MeshAxis::Pipeline, MeshAxis::Data, MeshAxis::Tensor};

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

DeviceMesh::DeviceMesh(MeshShape shape, int workers) : shape_(shape), workers_(workers) {
  const std::string what = "device mesh " + factors(shape) + " over " + std::to_string(workers) + " workers";
  if (workers < 1) throw ConfigError(what + ": there must be at least 1 worker");
  if (shape.ep < 1)
    throw ConfigError(what + ": ep=" + std::to_string(shape.ep) + " must be at least 1 (it is carved out of dp)");
  int rest_axes = 0;
  long long known = 1;
  for (MeshAxis axis : kProductAxes) {
    const int size = axis_ref(shape_, axis);
    if (size == -1) {
      ++rest_axes;
    } else if (size < 1) {
      throw ConfigError(what + ": " + mesh_axis_name(axis) + "=" + std::to_string(size) +
                        " must be at least 1 (or -1 for the rest of the workers)");
    } else {
      known *= size;
    }
  }
  if (rest_axes > 1) throw ConfigError(what + ": only one of pp, dp, tp may be -1 (the rest of the workers)");
  if (rest_axes == 1) {
    if (workers % known != 0)
      throw ConfigError(what + ": " + std::to_string(workers) + " workers are not divisible by the other axes' " +
                        "product " + std::to_string(known));
    for (MeshAxis axis : kProductAxes)
      if (axis_ref(shape_, axis) == -1) axis_ref(shape_, axis) = int(workers / known);
    known = workers;
  }
  if (known != workers)
    throw ConfigError("device mesh " + factors(shape_) + ": pp x dp x tp = " + std::to_string(known) +
                      " does not equal the " + std::to_string(workers) + " workers");
  if (shape_.dp % shape_.ep != 0)
    throw ConfigError("device mesh " + factors(shape_) + ": ep=" + std::to_string(shape_.ep) + " does not divide dp=" +
                      std::to_string(shape_.dp) + " (expert parallelism is carved out of the data-parallel ways)");
}

int DeviceMesh::size(MeshAxis axis) const { return axis_ref(const_cast<MeshShape&>(shape_), axis); }

void DeviceMesh::check_rank(int rank) const {
  if (rank < 0 || rank >= workers_)
    throw ConfigError("device mesh " + describe() + ": rank " + std::to_string(rank) + " is not a worker");
}

MeshCoord DeviceMesh::coord(int rank) const {
  check_rank(rank);
  MeshCoord c;
  c.tp = rank % shape_.tp;
  rank /= shape_.tp;
  c.dp = rank % shape_.dp;
  c.pp = rank / shape_.dp;
  c.ep = c.dp % shape_.ep;
  return c;
}

int DeviceMesh::rank_of(MeshCoord c) const {
  for (MeshAxis axis : kMeshAxes)
    if (c[axis] < 0 || c[axis] >= size(axis))
      throw ConfigError("device mesh " + describe() + ": coordinate " + mesh_axis_name(axis) + "=" +
                        std::to_string(c[axis]) + " is outside the axis");
  if (c.ep != c.dp % shape_.ep)
    throw ConfigError("device mesh " + describe() + ": expert coordinate " + std::to_string(c.ep) +
                      " does not belong to data coordinate " + std::to_string(c.dp));
  return (c.pp * shape_.dp + c.dp) * shape_.tp + c.tp;
}

std::vector<int> DeviceMesh::group_ranks(MeshAxis axis, int rank) const {
  MeshCoord c = coord(rank);
  std::vector<int> ranks;
  if (axis == MeshAxis::Expert) {  // the ep consecutive data ranks around this one
    const int first = c.dp - c.ep;
    for (int i = 0; i < shape_.ep; ++i) ranks.push_back(rank_of({.dp = first + i, .tp = c.tp, .pp = c.pp, .ep = i}));
    return ranks;
  }
  for (int i = 0; i < size(axis); ++i) {
    c[axis] = i;
    c.ep = c.dp % shape_.ep;
    ranks.push_back(rank_of(c));
  }
  return ranks;
}

std::vector<int> DeviceMesh::expert_data_ranks(int rank) const {
  const MeshCoord c = coord(rank);
  std::vector<int> ranks;
  for (int d = c.ep; d < shape_.dp; d += shape_.ep) ranks.push_back(rank_of({.dp = d, .tp = c.tp, .pp = c.pp, .ep = c.ep}));
  return ranks;
}

std::string DeviceMesh::describe() const { return factors(shape_) + " (" + std::to_string(workers_) + " workers)"; }

}  // namespace meshtrain::comm
