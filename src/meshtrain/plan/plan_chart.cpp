#include "meshtrain/plan/plan_chart.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace meshtrain::plan {
namespace {

std::string fmt(const char* format, double value) {
  char text[64];
  std::snprintf(text, sizeof text, format, value);
  return text;
}

std::string escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else out += c;
  }
  return out;
}

std::string rect(double x, double y, double w, double h, const char* fill) {
  return "<rect x=\"" + fmt("%.1f", x) + "\" y=\"" + fmt("%.1f", y) + "\" width=\"" + fmt("%.1f", std::max(w, 0.0)) +
         "\" height=\"" + fmt("%.1f", h) + "\" fill=\"" + fill + "\"/>\n";
}

std::string text(double x, double y, const std::string& body, const char* anchor = "start", const char* extra = "") {
  return "<text x=\"" + fmt("%.1f", x) + "\" y=\"" + fmt("%.1f", y) + "\" text-anchor=\"" + anchor + "\"" + extra +
         ">" + escape(body) + "</text>\n";
}

}  // namespace

std::string render_plan_svg(const Plan& plan) {
  std::vector<const StrategyEstimate*> rows;
  for (const StrategyEstimate& e : plan.strategies)
    if (e.applicable) rows.push_back(&e);
  // Layout: names | memory panel | step-time panel.
  constexpr double kName = 250, kPanel = 330, kGap = 40, kRow = 24, kTop = 70, kBottom = 50;
  const double width = kName + 2 * kPanel + kGap + 30, height = kTop + kRow * double(rows.size()) + kBottom;
  const double mem_x = kName, time_x = kName + kPanel + kGap;

  const double usable = plan.input.usable_bytes();
  double mem_max = usable;
  double t_min = 1e300, t_max = 0;
  for (const StrategyEstimate* e : rows) {
    mem_max = std::max(mem_max, e->memory.total());
    t_min = std::min(t_min, e->step_s), t_max = std::max(t_max, e->step_s);
  }
  const bool gb = mem_max >= 1e9;
  const double unit = gb ? 1e9 : 1e6;
  mem_max *= 1.05;
  const double log_lo = std::floor(std::log10(std::max(t_min, 1e-9))), log_hi = std::ceil(std::log10(t_max * 1.01));
  auto mem_px = [&](double bytes) { return mem_x + kPanel * bytes / mem_max; };
  auto time_px = [&](double s) { return time_x + kPanel * (std::log10(s) - log_lo) / std::max(log_hi - log_lo, 1.0); };

  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + fmt("%.0f", width) + "\" height=\"" +
                    fmt("%.0f", height) + "\" font-family=\"sans-serif\" font-size=\"12\">\n" +
                    "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  const Cluster& c = plan.input.cluster;
  svg += text(width / 2, 22,
              "meshtrain plan: " + std::to_string(c.nodes) + " x " + std::to_string(c.devices_per_node) + " " +
                  c.device.name + ", recommended " + plan.recommendation.key(),
              "middle", " font-size=\"15\"");
  svg += text(mem_x + kPanel / 2, 48, std::string("memory per device (") + (gb ? "GB" : "MB") + ")", "middle");
  svg += text(time_x + kPanel / 2, 48, "step time (log scale)", "middle");

  struct Kind {
    const char* name;
    const char* color;
    double DeviceMemory::*field;
  };
  const Kind kinds[] = {{"parameters", "#4c78a8", &DeviceMemory::parameters},
                        {"gradients", "#f58518", &DeviceMemory::gradients},
                        {"optimizer state", "#54a24b", &DeviceMemory::optimizer_state},
                        {"activations", "#b279a2", &DeviceMemory::activations}};
  for (size_t i = 0; i < rows.size(); ++i) {
    const StrategyEstimate& e = *rows[i];
    const double y = kTop + kRow * double(i);
    const bool chosen = plan.recommendation.strategy == e.kind;
    if (chosen) svg += rect(4, y - 2, width - 8, kRow, "#fff3bf");
    svg += text(kName - 8, y + 14, e.name, "end", chosen ? " font-weight=\"bold\"" : "");
    double x = mem_x;
    for (const Kind& k : kinds) {
      const double w = mem_px(e.memory.*k.field) - mem_x;
      svg += rect(x, y + 3, w, kRow - 8, k.color);
      x += w;
    }
    svg += text(x + 4, y + 14, fmt("%.1f", e.memory.total() / unit) + (e.fits ? "" : " (no fit)"));
    svg += rect(time_x, y + 3, time_px(e.step_s) - time_x, kRow - 8, e.fits ? "#72b7b2" : "#ccc");
    std::string label = fmt("%.3g s", e.step_s);
    if (e.train_s > 0) label += fmt(", %.2f days", e.train_s / 86400);
    svg += text(time_px(e.step_s) + 4, y + 14, label);
  }
  const double bottom = kTop + kRow * double(rows.size());
  // Usable memory, and the axes' ends.
  svg += "<line x1=\"" + fmt("%.1f", mem_px(usable)) + "\" y1=\"" + fmt("%.1f", kTop - 6) + "\" x2=\"" +
         fmt("%.1f", mem_px(usable)) + "\" y2=\"" + fmt("%.1f", bottom) +
         "\" stroke=\"#d62728\" stroke-dasharray=\"4 3\"/>\n";
  svg += text(mem_px(usable), bottom + 14, "usable " + fmt("%.1f", usable / unit), "middle", " fill=\"#d62728\"");
  for (double p = log_lo; p <= log_hi; ++p)
    svg += text(time_px(std::pow(10, p)), bottom + 14, fmt("%g s", std::pow(10, p)), "middle", " fill=\"#666\"");
  double lx = mem_x;
  for (const Kind& k : kinds) {
    svg += rect(lx, bottom + 26, 10, 10, k.color) + text(lx + 14, bottom + 35, k.name);
    lx += 18 + 7.0 * double(std::string(k.name).size());
  }
  return svg + "</svg>\n";
}

}  // namespace meshtrain::plan
