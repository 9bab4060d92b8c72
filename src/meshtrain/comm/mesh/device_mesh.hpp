#pragma once
// The device mesh: a job's worker ranks arranged as pp x dp x tp, with
// expert parallelism carved out of the data-parallel ways (ep divides dp), as
// DeepSpeed, Megatron and torchtitan read it. Every process group of a job is
// cut from it by one function (mesh_groups.hpp, which the job's parallel
// context, parallel/parallel_context.hpp, calls), so data, tensor, pipeline
// and expert parallelism agree on who is whose neighbour; the planner reads
// the same shape (plan/strategy_estimate.hpp's Layout), and the forecast
// (train/forecast/job_forecast.cpp) the same mesh. Data parallelism alone is the
// mesh dp = workers, the other sizes 1. Reducers and parameter servers are
// not worker ranks: they stay outside the mesh.
//
// Axis order (slowest to fastest varying in the rank number):
//   pp, dp, tp          rank = (pp_i * dp + dp_i) * tp + tp_i
// tp varies fastest, as in Megatron, so a tensor-parallel group is a run of
// consecutive ranks, which a launcher places on one host (tp exchanges
// activations every layer); dp next (one gradient reduction per step); pp
// slowest, since stages pass activations point to point and tolerate
// crossing hosts. Within dp, runs of ep consecutive data ranks form an
// expert group (each holds experts / ep of the experts; tokens travel
// between them by all-to-all); the data ranks with the same expert
// coordinate (stride ep) hold the same experts and reduce their gradients.
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

// Ways along each axis. One of dp, tp, pp may be -1, meaning "the rest of the
// workers"; ep (at least 1) divides dp.
struct MeshShape {
  int dp = 1, tp = 1, pp = 1, ep = 1;
  int workers() const { return dp * tp * pp; }  // ep is inside dp
};

// A rank's position along each axis; ep = dp % ep_size (its place in its
// expert group).
struct MeshCoord {
  int dp = 0, tp = 0, pp = 0, ep = 0;
  int operator[](MeshAxis axis) const;
  int& operator[](MeshAxis axis);
  bool operator==(const MeshCoord&) const = default;
};

class DeviceMesh {
 public:
  // Throws ConfigError when a size is 0 or below -1, more than one is -1, ep
  // is -1 or does not divide dp, or dp x tp x pp differs from `workers`; the
  // message names every factor.
  DeviceMesh(MeshShape shape, int workers);

  int workers() const { return workers_; }
  int size(MeshAxis axis) const;
  const MeshShape& shape() const { return shape_; }

  MeshCoord coord(int rank) const;
  int rank_of(MeshCoord coord) const;  // coord.ep must be coord.dp % ep
  // The ranks of the group along `axis` that contains `rank`, in order of
  // their coordinate on that axis (so the group rank is the coordinate).
  std::vector<int> group_ranks(MeshAxis axis, int rank) const;
  // The data ranks holding the same experts as `rank` (same pp, tp and expert
  // coordinate): where expert gradients are reduced. All of dp when ep = 1.
  std::vector<int> expert_data_ranks(int rank) const;
  // e.g. "pp=2 x dp=4 (ep=2) x tp=2 (16 workers)"
  std::string describe() const;

 private:
  void check_rank(int rank) const;

  MeshShape shape_;
  int workers_;
};

}  // namespace meshtrain::comm
