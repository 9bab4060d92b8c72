#pragma once
// What the planner estimates for one strategy on the given cluster.
#include "meshtrain/comm/mesh/device_mesh.hpp"
#include <cstdint>
#include <string>

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
  std::string key;   // short and stable, for --json and tests: "dp-ring", "zero-3", ...
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
};

std::string_view strategy_key(StrategyKind kind);

}  // namespace meshtrain::plan
