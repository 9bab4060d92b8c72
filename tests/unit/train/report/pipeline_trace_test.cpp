// The pipeline trace: what two workers' spans become in Chrome's trace
// format, the bubble read back from it, and the timeline drawn from it.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "meshtrain/core/error.hpp"
#include "meshtrain/train/report/pipeline_trace.hpp"
#include "meshtrain/train/report/timeline_svg.hpp"

namespace meshtrain {
namespace {

namespace pp = parallel::pipeline;

// [kind, micro-batch, chunk, start, end] as encode_spans writes them.
std::vector<double> span(pp::ActionKind kind, int m, double start, double end) {
  return {double(static_cast<int>(kind)), double(m), 0.0, start, end};
}

std::vector<double> join(std::initializer_list<std::vector<double>> parts) {
  std::vector<double> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

TEST(PipelineTrace, EventsCarryStagesAndTheBubbleIsIdleOverTheStep) {
  using K = pp::ActionKind;
  // Two stages, one micro-batch, times in seconds from 100: stage 0 computes
  // 3 s of a 4 s step, stage 1 2 s (its receive counts as idle).
  const std::vector<std::vector<double>> workers = {
      join({span(K::Forward, 0, 100, 101), span(K::SendActivation, 0, 101, 101.5), span(K::Backward, 0, 102, 104)}),
      join({span(K::RecvActivation, 0, 100, 101), span(K::Forward, 0, 101, 101.5), span(K::Backward, 0, 101.5, 103)}),
  };
  const comm::DeviceMesh mesh(comm::MeshShape{.dp = 1, .tp = 1, .pp = 2}, 2);
  const std::string json = pipeline_trace_json(workers, mesh, 1);
  const auto trace = nlohmann::json::parse(json);
  int complete = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] != "X") continue;
    ++complete;
    if (e["pid"] == 1 && e["name"] == "forward") {
      EXPECT_DOUBLE_EQ(e["ts"].get<double>(), 1e6) << "microseconds from the earliest span";
      EXPECT_DOUBLE_EQ(e["dur"].get<double>(), 0.5e6);
      EXPECT_EQ(e["args"]["stage"], 1);
      EXPECT_EQ(e["cat"], "compute");
    }
  }
  EXPECT_EQ(complete, 6);
  const TimelineSummary summary = summarize_trace(json);
  EXPECT_EQ(summary.ranks, 2);
  EXPECT_NEAR(summary.makespan_s, 4.0, 1e-9);
  EXPECT_NEAR(summary.bubble, 1.0 - (3.0 + 2.0) / (2 * 4.0), 1e-9);
  const std::string svg = render_timeline_svg(json, "run");
  EXPECT_NE(svg.find("bubble 37.5%"), std::string::npos) << svg.substr(0, 400);
  EXPECT_NE(svg.find("stage 1 (worker 1, dp 0, tp 0)"), std::string::npos);
  EXPECT_NE(svg.find(">F0<"), std::string::npos) << "wide boxes carry their micro-batch";
}

TEST(PipelineTrace, NotATraceIsADataError) {
  EXPECT_THROW(summarize_trace("{]"), DataError);
  EXPECT_THROW(summarize_trace("{\"x\": 1}"), DataError);
  EXPECT_THROW(render_timeline_svg("{\"traceEvents\": []}", "empty"), DataError);
}

}  // namespace
}  // namespace meshtrain
