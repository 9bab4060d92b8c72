#include "meshtrain/train/report/pipeline_trace.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>

#include "meshtrain/core/enum_names.hpp"
#include "meshtrain/core/error.hpp"

namespace meshtrain {

namespace pp = parallel::pipeline;

std::vector<double> encode_spans(const pp::PipelineExecutor& executor) {
  std::vector<double> out;
  const double t0 = executor.step_start_s();
  for (const pp::ActionSpan& s : executor.spans())
    out.insert(out.end(), {double(static_cast<int>(s.action.kind)), double(s.action.micro_batch),
                           double(s.action.chunk), t0 + s.start_s, t0 + s.end_s});
  return out;
}

std::string pipeline_trace_json(const std::vector<std::vector<double>>& workers, const comm::DeviceMesh& mesh,
                                int chunks) {
  double origin = std::numeric_limits<double>::infinity();
  for (const auto& spans : workers)
    for (size_t i = 0; i + 4 < spans.size(); i += 5) origin = std::min(origin, spans[i + 3]);
  nlohmann::json events = nlohmann::json::array();
  const int P = mesh.size(comm::MeshAxis::Pipeline);
  for (size_t rank = 0; rank < workers.size(); ++rank) {
    const comm::MeshCoord at = mesh.coord(static_cast<int>(rank));
    events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", rank},
                      {"args", {{"name", "stage " + std::to_string(at.pp) + " (worker " + std::to_string(rank) +
                                             ", dp " + std::to_string(at.dp) + ", tp " + std::to_string(at.tp) + ")"}}}});
    events.push_back({{"name", "process_sort_index"}, {"ph", "M"}, {"pid", rank}, {"args", {{"sort_index", rank}}}});
    const auto& spans = workers[rank];
    for (size_t i = 0; i + 4 < spans.size(); i += 5) {
      const auto kind = static_cast<pp::ActionKind>(static_cast<int>(spans[i]));
      const int chunk = static_cast<int>(spans[i + 2]);
      events.push_back({{"name", enum_string(kind)},
                        {"cat", pp::is_compute(kind) ? "compute" : "comm"},
                        {"ph", "X"},
                        {"pid", rank},
                        {"tid", 0},
                        {"ts", (spans[i + 3] - origin) * 1e6},
                        {"dur", (spans[i + 4] - spans[i + 3]) * 1e6},
                        {"args", {{"micro_batch", static_cast<int>(spans[i + 1])},
                                  {"chunk", chunk},
                                  {"stage", chunk * P + at.pp},
                                  {"pp", at.pp},
                                  {"dp", at.dp},
                                  {"tp", at.tp}}}});
    }
  }
  const nlohmann::json trace = {{"traceEvents", events},
                                {"displayTimeUnit", "ms"},
                                {"otherData", {{"mesh", mesh.describe()}, {"virtual_stages", chunks}}}};
  return trace.dump(1);
}

TimelineSummary summarize_trace(const std::string& trace_json) {
  nlohmann::json trace;
  try {
    trace = nlohmann::json::parse(trace_json);
  } catch (const nlohmann::json::exception& e) {
    throw DataError(std::string("pipeline trace: not JSON: ") + e.what());
  }
  if (!trace.contains("traceEvents")) throw DataError("pipeline trace: no traceEvents");
  // Per pipeline stage of replica 0, tensor rank 0: busy time, first start, last end.
  struct Rank {
    double busy = 0, start = std::numeric_limits<double>::infinity(), end = 0;
  };
  std::map<int, Rank> ranks;
  for (const auto& e : trace["traceEvents"]) {
    if (e.value("ph", "") != "X") continue;
    const auto& args = e["args"];
    if (args.value("dp", 0) != 0 || args.value("tp", 0) != 0) continue;
    Rank& r = ranks[args.value("pp", 0)];
    const double ts = e["ts"].get<double>() * 1e-6, dur = e["dur"].get<double>() * 1e-6;
    r.start = std::min(r.start, ts);
    r.end = std::max(r.end, ts + dur);
    if (e.value("cat", "") == "compute") r.busy += dur;
  }
  if (ranks.empty()) throw DataError("pipeline trace: no actions");
  double start = std::numeric_limits<double>::infinity(), end = 0, busy = 0;
  for (const auto& [stage, r] : ranks) {
    start = std::min(start, r.start);
    end = std::max(end, r.end);
    busy += r.busy;
  }
  TimelineSummary out{.makespan_s = end - start, .ranks = static_cast<int>(ranks.size())};
  out.bubble = out.makespan_s > 0 ? 1.0 - busy / (out.ranks * out.makespan_s) : 0.0;
  return out;
}

}  // namespace meshtrain
