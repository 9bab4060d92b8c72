#pragma once
// What the planner estimates for one strategy on the given cluster.
#include <cstdint>
#include <span>
#include <string>

#include "meshtrain/comm/mesh/device_mesh.hpp"
#include "meshtrain/core/enum_names.hpp"

namespace meshtrain::plan {

enum class StrategyKind {
  SingleDevice,
  DataParallelRing,
  DataParallelTree,
  ReductionServer,
  ParameterServer,
  Zero1,
  Zero2,
  Zero3,
  TensorData,
  PipelineData,
  TensorPipelineData,
  ExpertData,
};
// Each strategy's key: short and stable, for --json, the SVG and tests.
inline constexpr EnumName<StrategyKind> kStrategyKeys[] = {
    {StrategyKind::SingleDevice, "single"},
    {StrategyKind::DataParallelRing, "dp-ring"},
    {StrategyKind::DataParallelTree, "dp-tree"},
    {StrategyKind::ReductionServer, "dp-reduction-server"},
    {StrategyKind::ParameterServer, "parameter-server"},
    {StrategyKind::Zero1, "zero-1"},
    {StrategyKind::Zero2, "zero-2"},
    {StrategyKind::Zero3, "zero-3"},
    {StrategyKind::TensorData, "tp-dp"},
    {StrategyKind::PipelineData, "pp-dp"},
    {StrategyKind::TensorPipelineData, "tp-pp-dp"},
    {StrategyKind::ExpertData, "ep-dp"},
};
constexpr std::span<const EnumName<StrategyKind>> enum_names(StrategyKind) { return kStrategyKeys; }

// ZeRO's stage (1, 2, 3) of a sharded strategy, 0 for the others.
constexpr int zero_stage(StrategyKind kind) {
  return kind == StrategyKind::Zero1 ? 1 : kind == StrategyKind::Zero2 ? 2 : kind == StrategyKind::Zero3 ? 3 : 0;
}

// Ways along each mesh axis: the runtime's own definition (comm/mesh/
// device_mesh.hpp), so planner and runtime read a layout alike. workers() is
// the devices used; expert parallelism cuts the experts across `ep` of the
// data-parallel devices.
using Layout = comm::MeshShape;

struct DeviceMemory {  // bytes per device
  double parameters = 0, gradients = 0, optimizer_state = 0, activations = 0;
  double model_state() const { return parameters + gradients + optimizer_state; }
  double total() const { return model_state() + activations; }
};

struct StrategyEstimate {
  StrategyKind kind{};
  std::string name;  // for people
  bool applicable = true;  // false: not for this model or cluster (note says why)
  Layout layout;
  DeviceMemory memory;
  bool fits = false;
  bool recompute = false;    // activation recomputation was needed to fit
  int64_t micro_batch = 0;   // samples per device per forward
  int64_t accumulation = 0;  // micro-batches per optimizer step on each replica
  double comm_bytes = 0;     // sent per device per step
  double compute_s = 0;      // per step, pipeline bubble included
  double comm_s = 0;         // per step, the part not hidden behind compute
  double comm_exchange_s = 0;  // per step, the gradient exchange whole (before overlap)
  double step_s = 0;
  double train_s = 0;        // 0: the amount of training is unknown
  std::string note;  // why it does not apply, or a caveat

  std::string key() const { return enum_string(kind); }  // "dp-ring", "zero-3", ...
};

}  // namespace meshtrain::plan
