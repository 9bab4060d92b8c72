#include "meshtrain/train/report/rank_heatmap_svg.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "meshtrain/core/error.hpp"

namespace meshtrain {
namespace {

struct Cell {
  double busy_ms = 0, slow = 1;
};

struct Interval {
  int64_t step = 0;
  std::vector<Cell> workers;
};

std::vector<Interval> read_intervals(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw IoError(path + ": cannot read");
  std::vector<Interval> out;
  std::string line;
  while (std::getline(in, line)) {
    const auto rec = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!rec.is_object() || !rec.contains("ranks") || !rec["ranks"].is_array() || !rec.contains("step")) continue;
    Interval iv{.step = rec["step"].get<int64_t>(), .workers = {}};
    for (const auto& r : rec["ranks"])
      iv.workers.push_back({r.value("busy_ms", 0.0), r.value("slow_vs_fastest", 1.0)});
    out.push_back(std::move(iv));
  }
  if (out.empty())
    throw DataError(path + ": no per-rank records (they are written every log interval by jobs of several workers)");
  return out;
}

// White at 1x the fastest, red at 3x and beyond.
std::string colour(double slow) {
  const double t = std::clamp((slow - 1.0) / 2.0, 0.0, 1.0);
  char buf[16];
  const int gb = static_cast<int>(255 * (1 - t));
  std::snprintf(buf, sizeof buf, "#ff%02x%02x", gb, gb);
  return buf;
}

}  // namespace

std::string render_rank_heatmap_svg(const std::string& metrics_path) {
  const std::vector<Interval> intervals = read_intervals(metrics_path);
  size_t workers = 0;
  for (const Interval& iv : intervals) workers = std::max(workers, iv.workers.size());
  const double left = 80, top = 40, cell_w = std::max(2.0, 800.0 / double(intervals.size())), cell_h = 24;
  const double width = left + cell_w * double(intervals.size()) + 20, height = top + cell_h * double(workers) + 40;
  std::string svg;
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" font-family=\"sans-serif\" "
                "font-size=\"12\">\n<text x=\"%.0f\" y=\"20\">%s: busy time per step, x the fastest worker "
                "(white 1x, red 3x)</text>\n",
                width, height, left, metrics_path.c_str());
  svg += buf;
  for (size_t w = 0; w < workers; ++w) {
    std::snprintf(buf, sizeof buf, "<text x=\"8\" y=\"%.1f\">worker %zu</text>\n", top + cell_h * (double(w) + 0.7), w);
    svg += buf;
  }
  for (size_t i = 0; i < intervals.size(); ++i)
    for (size_t w = 0; w < intervals[i].workers.size(); ++w) {
      const Cell& c = intervals[i].workers[w];
      std::snprintf(buf, sizeof buf,
                    "<rect data-worker=\"%zu\" data-step=\"%lld\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
                    "height=\"%.1f\" fill=\"%s\"><title>worker %zu, step %lld: busy %.1f ms per step, %.2fx the "
                    "fastest</title></rect>\n",
                    w, (long long)intervals[i].step, left + cell_w * double(i), top + cell_h * double(w), cell_w,
                    cell_h, colour(c.slow).c_str(), w, (long long)intervals[i].step, c.busy_ms, c.slow);
      svg += buf;
    }
  std::snprintf(buf, sizeof buf,
                "<text x=\"%.0f\" y=\"%.0f\">step %lld</text><text x=\"%.0f\" y=\"%.0f\" text-anchor=\"end\">step "
                "%lld</text>\n</svg>\n",
                left, top + cell_h * double(workers) + 20, (long long)intervals.front().step,
                left + cell_w * double(intervals.size()), top + cell_h * double(workers) + 20,
                (long long)intervals.back().step);
  svg += buf;
  return svg;
}

}  // namespace meshtrain
