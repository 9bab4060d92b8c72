#include "meshtrain/train/loop/step_record.hpp"

#include <cmath>
#include <string>
#include <vector>

#include "meshtrain/core/memory.hpp"

namespace meshtrain {
namespace {

void add_moe_metrics(nlohmann::json& record, const std::vector<MoeLayerReport>& layers) {
  double aux = 0, z = 0, dropped = 0;
  nlohmann::json per_layer = nlohmann::json::array();
  for (const MoeLayerReport& l : layers) {
    aux += l.aux_loss;
    z += l.z_loss;
    dropped += l.dropped;
    per_layer.push_back({{"layer", l.layer}, {"load", l.load}, {"tokens", l.tokens}, {"dropped", l.dropped},
                         {"aux_loss", l.aux_loss}, {"z_loss", l.z_loss}});
  }
  record["aux_loss"] = aux;
  record["z_loss"] = z;
  record["dropped_tokens"] = dropped;
  record["moe"] = per_layer;
}

}  // namespace

void add_step_fields(nlohmann::json& record, const StepResult& r) {
  if (std::isfinite(r.loss)) {
    record["loss"] = r.loss;
    record["grad_norm"] = r.grad_norm;
  }
  if (r.skipped) record["skipped"] = r.skipped;
  if (!r.moe.empty()) add_moe_metrics(record, r.moe);
}

void add_layout_fields(nlohmann::json& record, const comm::DeviceMesh& mesh, int zero_stage) {
  record["workers"] = mesh.workers();
  record["data_parallel"] = mesh.size(comm::MeshAxis::Data);
  record["tensor_parallel"] = mesh.size(comm::MeshAxis::Tensor);
  record["pipeline_parallel"] = mesh.size(comm::MeshAxis::Pipeline);
  record["expert_parallel"] = mesh.size(comm::MeshAxis::Expert);
  record["zero_stage"] = zero_stage;
}

void add_overlap_fields(nlohmann::json& record, const StepCommunication& comm) {
  record["comm_ms"] = comm.time.busy_s * 1e3;
  record["comm_hidden_share"] = comm.time.hidden_share();
  if (comm.gathers_on_demand) record["comm_gathers_on_demand"] = *comm.gathers_on_demand;
}

void add_memory_peaks(nlohmann::json& record, const MemoryTracker& tracker) {
  for (size_t k = 0; k < kMemoryKindCount; ++k) {
    const auto kind = static_cast<MemoryKind>(k);
    record["peak_" + std::string(memory_kind_name(kind)) + "_mb"] = double(tracker.peak(kind)) / (1 << 20);
  }
  record["peak_total_mb"] = double(tracker.peak_total()) / (1 << 20);
  if (&tracker != &MemoryTracker::global())
    record["peak_host_total_mb"] = double(MemoryTracker::global().peak_total()) / (1 << 20);
}

}  // namespace meshtrain
