#include "meshtrain/train/report/timeline_svg.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "meshtrain/core/error.hpp"
#include "meshtrain/train/report/pipeline_trace.hpp"

namespace meshtrain {
namespace {

struct Style {
  const char* kind;
  const char* fill;
  const char* label;
};
constexpr Style kStyles[] = {
    {"forward", "#4e79a7", "F"},        {"backward", "#59a14f", "B"},         {"backward_input", "#f28e2b", "B"},
    {"backward_weight", "#b07aa1", "W"}, {"send_activation", "#bab0ac", ""},  {"recv_activation", "#bab0ac", ""},
    {"send_gradient", "#bab0ac", ""},    {"recv_gradient", "#bab0ac", ""},
};

const Style& style_of(const std::string& kind) {
  for (const Style& s : kStyles)
    if (kind == s.kind) return s;
  return kStyles[4];
}

std::string escape(const std::string& text) {
  std::string out;
  for (char c : text) out += c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '&' ? "&amp;" : std::string(1, c);
  return out;
}

}  // namespace

std::string render_timeline_svg(const std::string& trace_json, const std::string& title) {
  const TimelineSummary summary = summarize_trace(trace_json);  // validates the trace
  const nlohmann::json trace = nlohmann::json::parse(trace_json);
  std::map<int, std::string> names;
  double end = 0;
  for (const auto& e : trace["traceEvents"]) {
    const int pid = e.value("pid", 0);
    if (e.value("ph", "") == "M" && e.value("name", "") == "process_name") names[pid] = e["args"].value("name", "");
    if (e.value("ph", "") == "X") {
      names.emplace(pid, "worker " + std::to_string(pid));
      end = std::max(end, e["ts"].get<double>() + e["dur"].get<double>());
    }
  }
  const double left = 230, width = 1000, row = 28, top = 50;
  const double height = top + row * static_cast<double>(names.size()) + 60;
  const double scale = end > 0 ? width / end : 1.0;  // px per microsecond
  std::map<int, int> row_of;
  for (const auto& [pid, name] : names) row_of[pid] = static_cast<int>(row_of.size());
  std::ostringstream svg;
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" font-family=\"sans-serif\" "
                "font-size=\"11\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
                left + width + 20, height);
  svg << buf;
  std::snprintf(buf, sizeof buf,
                "<text x=\"10\" y=\"20\" font-size=\"14\">%s: one step, %.1f ms, bubble %.1f%% (%d stages of "
                "replica 0)</text>\n",
                escape(title).c_str(), summary.makespan_s * 1e3, summary.bubble * 100, summary.ranks);
  svg << buf;
  for (const auto& [pid, name] : names) {
    const double y = top + row * row_of[pid];
    std::snprintf(buf, sizeof buf, "<text x=\"10\" y=\"%.1f\">%s</text>\n", y + row * 0.6, escape(name).c_str());
    svg << buf;
  }
  for (const auto& e : trace["traceEvents"]) {
    if (e.value("ph", "") != "X") continue;
    const Style& st = style_of(e.value("name", ""));
    const double x = left + e["ts"].get<double>() * scale, w = std::max(0.5, e["dur"].get<double>() * scale);
    const double y = top + row * row_of[e.value("pid", 0)] + 3;
    const bool comm = e.value("cat", "") == "comm";
    const double h = comm ? (row - 6) / 3 : row - 6, dy = comm ? (row - 6) / 3 : 0;
    std::snprintf(buf, sizeof buf,
                  "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\"><title>%s micro-batch %d "
                  "chunk %d: %.3f ms</title></rect>\n",
                  x, y + dy, w, h, st.fill, e.value("name", "").c_str(), e["args"].value("micro_batch", 0),
                  e["args"].value("chunk", 0), e["dur"].get<double>() * 1e-3);
    svg << buf;
    if (!comm && w >= 16) {
      std::snprintf(buf, sizeof buf,
                    "<text x=\"%.2f\" y=\"%.2f\" fill=\"white\" text-anchor=\"middle\">%s%d</text>\n", x + w / 2,
                    y + (row - 6) * 0.65, st.label, e["args"].value("micro_batch", 0));
      svg << buf;
    }
  }
  // Time axis and legend.
  const double axis_y = top + row * static_cast<double>(names.size()) + 15;
  std::snprintf(buf, sizeof buf, "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"black\"/>\n", left,
                axis_y, left + width, axis_y);
  svg << buf;
  for (int i = 0; i <= 4; ++i) {
    std::snprintf(buf, sizeof buf, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.1f ms</text>\n",
                  left + width * i / 4, axis_y + 14, end * 1e-3 * i / 4);
    svg << buf;
  }
  const char* legend[][2] = {{"#4e79a7", "forward"},        {"#59a14f", "backward"}, {"#f28e2b", "backward (input)"},
                             {"#b07aa1", "backward (weight)"}, {"#bab0ac", "send/recv"}};
  for (int i = 0; i < 5; ++i) {
    const double x = left + 170.0 * i;
    std::snprintf(buf, sizeof buf,
                  "<rect x=\"%.0f\" y=\"%.1f\" width=\"12\" height=\"12\" fill=\"%s\"/><text x=\"%.0f\" "
                  "y=\"%.1f\">%s</text>\n",
                  x, axis_y + 24, legend[i][0], x + 16, axis_y + 34, legend[i][1]);
    svg << buf;
  }
  svg << "</svg>\n";
  return svg.str();
}

}  // namespace meshtrain
