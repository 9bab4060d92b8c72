#pragma once
// The device mesh: the world's ranks arranged as a grid dp x tp x pp x ep.
// Every process group of a job is cut from it (mesh_groups.hpp), so data,
// tensor, pipeline and expert parallelism agree on who is whose neighbour.
// Data parallelism alone is the mesh dp = world, the other sizes 1.
//
// Axis order (slowest to fastest varying in the rank number):
//   pp, dp, ep, tp
//   rank = ((pp_i * dp + dp_i) * ep + ep_i) * tp + tp_i
// tp varies fastest, as in Megatron, so a tensor-parallel group is a run of
// consecutive ranks, which the launcher places on one host (tp exchanges
// activations every layer). ep comes next (all-to-all every MoE layer), then
// dp (one gradient all-reduce per step); pp varies slowest, since stages
// only pass activations point to point and tolerate crossing hosts.
//
// "axis" names a mesh direction; "dim" is kept for tensor dimensions.
#include <array>
#include <string>
#include <vector>

namespace meshtrain::comm {

enum class MeshAxis { Data, Tensor, Pipeline, Expert };
inline constexpr std::array<MeshAxis, 4> kMeshAxes{MeshAxis::Data, MeshAxis::Tensor, MeshAxis::Pipeline,
                                                   MeshAxis::Expert};

// "dp", "tp", "pp", "ep"
const char* mesh_axis_name(MeshAxis axis);

// Requested sizes; one of them may be -1, meaning "the rest of the world".
struct MeshShape {
  int dp = 1, tp = 1, pp = 1, ep = 1;
};

// A rank's position along each axis.
struct MeshCoord {
  int dp = 0, tp = 0, pp = 0, ep = 0;
  int operator[](MeshAxis axis) const;
  int& operator[](MeshAxis axis);
  bool operator==(const MeshCoord&) const = default;
};

class DeviceMesh {
 public:
  // Throws ConfigError when a size is 0 or below -1, more than one is -1,
  // or the product differs from world_size (naming every factor).
  DeviceMesh(MeshShape shape, int world_size);

  int world_size() const { return world_size_; }
  int size(MeshAxis axis) const;
  const MeshShape& shape() const { return shape_; }

  MeshCoord coord(int rank) const;
  int rank_of(MeshCoord coord) const;
  // The global ranks of the group along `axis` that contains `rank`, in
  // order of their coordinate on that axis (so the group rank is the coordinate).
  std::vector<int> group_ranks(MeshAxis axis, int rank) const;
  // e.g. "dp=2 x tp=4 x pp=1 x ep=1 (8 ranks)"
  std::string describe() const;

 private:
  void check_rank(int rank) const;

  MeshShape shape_;
  int world_size_;
};

}  // namespace meshtrain::comm
