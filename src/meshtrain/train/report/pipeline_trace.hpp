#pragma once
// The pipeline timeline of one step, every worker's actions in one file:
// Chrome's trace event format (JSON, "X" complete events in microseconds),
// which chrome://tracing and ui.perfetto.dev open, and which `meshtrain plot`
// draws as an SVG timeline (timeline_svg.hpp). One process ("pid") per
// worker, named by its stage and mesh coordinate; each event is one action
// (forward, backward, backward_input, backward_weight) or one exchange of
// sends and receives (named by its first action, category "comm"), with its
// micro-batch, chunk and virtual stage in "args".
//
// Workers pass their spans around as doubles (encode_spans) so one
// all-gather brings every rank's to the lead; times are the steady clock's,
// shared by the processes of a host, and the trace starts at the earliest.
#include <span>
#include <string>
#include <vector>

#include "meshtrain/comm/mesh/device_mesh.hpp"
#include "meshtrain/parallel/pipeline/executor.hpp"

namespace meshtrain {

// [kind, micro-batch, chunk, start, end] per span, times absolute.
std::vector<double> encode_spans(const parallel::pipeline::PipelineExecutor& executor);

// The trace JSON of every worker's encoded spans (index = worker rank).
std::string pipeline_trace_json(const std::vector<std::vector<double>>& workers, const comm::DeviceMesh& mesh,
                                int chunks);

// What a trace shows of one step: its length and the bubble, the share of
// P x makespan that the pipeline ranks of data replica 0, tensor rank 0
// spent not computing (sends and receives count as idle, as the schedule
// formulas count them).
struct TimelineSummary {
  double makespan_s = 0;
  double bubble = 0;
  int ranks = 0;
};
TimelineSummary summarize_trace(const std::string& trace_json);

}  // namespace meshtrain
