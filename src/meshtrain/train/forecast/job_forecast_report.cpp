// The job forecast as `plan --config` prints it: the text report and its
// JSON (job_forecast.hpp); forecast_job makes the numbers (job_forecast.cpp).
#include <cstdio>
#include <string>

#include "meshtrain/train/forecast/job_forecast.hpp"

namespace meshtrain {

namespace {

// A right-aligned column of the report's memory table.
std::string mib_column(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%9.2f MiB", bytes / (1 << 20));
  return text;
}

std::string ms_short(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f ms", seconds * 1e3);
  return text;
}

std::string ms(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%9.2f ms", seconds * 1e3);
  return text;
}

// The report's first lines: the job, its mesh, experts, links and hosts.
std::string describe_job(const JobForecast& f) {
  char line[256];
  std::string out;
  std::snprintf(line, sizeof line,
                "job: %s, %zu parameters, %d worker%s x %d thread%s on %s, batch %lld per worker, ZeRO stage %d, "
                "all-reduce %s%s\n",
                f.model_kind.c_str(), f.parameters, f.workers, f.workers == 1 ? "" : "s", f.threads,
                f.threads == 1 ? "" : "s", f.device.c_str(), (long long)f.batch_per_worker, f.zero_stage,
                f.algorithm.c_str(), f.bf16_wire ? ", bf16 on the wire" : "");
  out += line;
  if (f.tensor > 1 || f.pipeline > 1) {
    std::snprintf(line, sizeof line,
                  "mesh: %d pipeline x %d data-parallel x %d tensor-parallel ways (a tensor group shares a batch)\n",
                  f.pipeline, f.workers / (f.tensor * f.pipeline), f.tensor);
    out += line;
  }
  if (f.experts > 1) {
    std::snprintf(line, sizeof line,
                  "experts: %d per MoE layer, %d expert-parallel way%s (%d on each rank); the busiest expert rank "
                  "computes %.2fx an even share of the rows (the probe's routing)\n",
                  f.experts, f.expert, f.expert == 1 ? "" : "s", f.experts / f.expert, f.routing_imbalance);
    out += line;
  }
  if (!f.interconnect.empty()) out += "interconnect (assumed, not measured): " + f.interconnect + "\n";
  if (f.hosts > 1) {
    std::string across;
    for (const std::string& g : f.crossing) across += (across.empty() ? "" : ", ") + g;
    std::snprintf(line, sizeof line, "hosts: %d, %d workers each; across their network: %s\n", f.hosts,
                  f.workers / f.hosts, across.empty() ? "nothing" : across.c_str());
    out += line;
  }
  return out;
}

}  // namespace

std::string format_job_forecast(const JobForecast& f) {
  char line[256];
  std::string out = describe_job(f);
  if (f.pipeline > 1) {
    std::snprintf(line, sizeof line,
                  "pipeline: schedule %s, %d micro-batches, %d chunk(s) per rank; simulated bubble %.1f%%\n",
                  f.schedule.c_str(), f.micro_batches, f.virtual_stages, f.bubble * 100);
    out += line;
    for (const StageForecast& s : f.stages) {
      std::snprintf(line, sizeof line,
                    "  stage %d: model state %s, activations %s (%d slot%s), total %s; per micro-batch and chunk "
                    "forward %s, backward %s%s\n",
                    s.stage, mib_column(double(s.model_state.total())).c_str(), mib_column(double(s.activations)).c_str(),
                    s.slots, s.slots == 1 ? "" : "s",
                    mib_column(double(s.model_state.total() + s.activations + f.data + f.checkpoint_copies)).c_str(),
                    ms_short(s.forward_s).c_str(), ms_short(s.backward_s).c_str(),
                    s.weight_s > 0 ? (", weight " + ms_short(s.weight_s)).c_str() : "");
      out += line;
    }
  }
  out += std::string("predicted peak memory per rank") + (f.pipeline > 1 ? " (the largest stage)" : "") + ":\n";
  out += "  parameters        " + mib_column(double(f.model_state.parameters)) + "\n";
  out += "  gradients         " + mib_column(double(f.model_state.gradients)) + "\n";
  out += "  optimizer_state   " + mib_column(double(f.model_state.optimizer_state)) + "\n";
  out += "  communication     " + mib_column(double(f.model_state.communication)) + "\n";
  out += "  activations       " + mib_column(double(f.activations)) + "   (probe)\n";
  out += "  data              " + mib_column(double(f.data)) + "   (probe)\n";
  if (f.checkpoint_copies) out += "  checkpoint copies " + mib_column(double(f.checkpoint_copies)) + "\n";
  out += "  total             " + mib_column(double(f.memory_total())) + "\n";
  out += "predicted step time per worker:\n";
  out += "  forward+backward  " + ms(f.forward_backward_s) + (f.pipeline > 1 ? "   (the schedule with the stages' probed times" : "   (probe") + ", median of " + std::to_string(f.probe_steps) +
         " steps" +
         (f.workers > 1 && f.shared_host
              ? ", " + std::to_string(f.workers) + " workers at once; alone " + ms_short(f.alone_forward_backward_s)
          : f.workers > 1 ? ", one worker: each has its own device"
                          : std::string()) +
         ")\n";
  out += "  clip+update       " + ms(f.update_s) + (f.zero_stage >= 1 ? "   (the worker's shard)\n" : "\n");
  std::snprintf(line, sizeof line, "   (%.2f MB sent per worker)\n", f.comm_bytes / 1e6);
  out += "  communication     " + ms(f.comm_s) + line;
  if (f.comm_hidden_s > 0)
    out += "    of it hidden    " + ms(f.comm_hidden_s) +
           "   (on the devices' communication stream, behind forward and backward)\n";
  if (f.tensor > 1) {
    std::snprintf(line, sizeof line, "   (%.2f MB sent per worker, inside the layers)\n", f.tensor_comm_bytes / 1e6);
    out += "  tensor all-reduce " + ms(f.tensor_comm_s) + line;
  }
  if (f.pipeline > 1) {
    std::snprintf(line, sizeof line, "   (%.2f MB between stages and the tied embedding's sum)\n", f.pipeline_comm_bytes / 1e6);
    out += "  pipeline sends    " + ms(f.pipeline_comm_s) + line;
  }
  if (f.experts > 1) {
    std::snprintf(line, sizeof line, "   (%.2f MB sent per worker, inside the MoE layers; routing sums)\n",
                  f.expert_comm_bytes / 1e6);
    out += "  expert all-to-all " + ms(f.expert_comm_s) + line;
  }
  out += "  step              " + ms(f.step_s()) + "\n";
  return out;
}

nlohmann::json job_forecast_to_json(const JobForecast& f) {
  nlohmann::json stages = nlohmann::json::array();
  for (const StageForecast& s : f.stages)
    stages.push_back({{"stage", s.stage},
                      {"parameters", s.parameters},
                      {"model_state_bytes", s.model_state.total()},
                      {"activations_bytes", s.activations},
                      {"slots", s.slots},
                      {"total_bytes", s.model_state.total() + s.activations + f.data + f.checkpoint_copies},
                      {"forward_s", s.forward_s},
                      {"backward_s", s.backward_s},
                      {"weight_s", s.weight_s}});
  return {{"model", f.model_kind},
          {"device", f.device},
          {"pipeline_parallel", f.pipeline},
          {"schedule", f.schedule},
          {"micro_batches", f.micro_batches},
          {"bubble", f.bubble},
          {"stages", stages},
          {"parameters", f.parameters},
          {"workers", f.workers},
          {"tensor_parallel", f.tensor},
          {"n_expert", f.experts},
          {"expert_parallel", f.expert},
          {"routing_imbalance", f.routing_imbalance},
          {"hosts", f.hosts},
          {"crossing_hosts", f.crossing},
          {"interconnect", f.interconnect},
          {"threads", f.threads},
          {"zero_stage", f.zero_stage},
          {"all_reduce", f.algorithm},
          {"reduce_dtype", f.bf16_wire ? "bf16" : "fp32"},
          {"batch_per_worker", f.batch_per_worker},
          {"memory_bytes",
           {{"parameters", f.model_state.parameters},
            {"gradients", f.model_state.gradients},
            {"optimizer_state", f.model_state.optimizer_state},
            {"communication", f.model_state.communication},
            {"activations", f.activations},
            {"data", f.data},
            {"checkpoint_copies", f.checkpoint_copies},
            {"total", f.memory_total()}}},
          {"step_s",
           {{"forward_backward", f.forward_backward_s},
            {"forward_backward_alone", f.alone_forward_backward_s},
            {"update", f.update_s},
            {"communication", f.comm_s},
            {"communication_hidden", f.comm_hidden_s},
            {"tensor_communication", f.tensor_comm_s},
            {"pipeline_communication", f.pipeline_comm_s},
            {"expert_communication", f.expert_comm_s},
            {"total", f.step_s()}}},
          {"comm_bytes_per_step", f.comm_bytes},  // the data-parallel group's; the other axes' below
          {"tensor_comm_bytes_per_step", f.tensor_comm_bytes},
          {"pipeline_comm_bytes_per_step", f.pipeline_comm_bytes},
          {"expert_comm_bytes_per_step", f.expert_comm_bytes},
          {"probe_steps", f.probe_steps}};
}

}  // namespace meshtrain
