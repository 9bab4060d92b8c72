#include "meshtrain/train/report/svg_plot.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "meshtrain/core/error.hpp"

namespace meshtrain {

Series read_series(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  if (!in) throw IoError(path + ": cannot open metrics file");
  Series s{key, {}, {}};
  std::string line;
  for (int line_no = 1; std::getline(in, line); ++line_no) {
    if (line.empty()) continue;
    auto record = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (record.is_discarded()) throw DataError(path + ":" + std::to_string(line_no) + ": not a JSON object");
    if (record.contains(key) && record.contains("step") && record[key].is_number()) {
      s.x.push_back(record["step"].get<double>());
      s.y.push_back(record[key].get<double>());
    }
  }
  return s;
}

namespace {

// Round tick spacing (1, 2 or 5 times a power of ten) giving about n ticks.
double tick_step(double span, int n) {
  const double raw = span / n, mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (raw <= m * mag) return m * mag;
  return 10 * mag;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

}  // namespace

std::string render_svg(const std::vector<Series>& series, const std::string& title) {
  constexpr double W = 720, H = 420, L = 60, R = 20, T = 40, B = 50;
  double x0 = HUGE_VAL, x1 = -HUGE_VAL, y0 = HUGE_VAL, y1 = -HUGE_VAL;
  for (const auto& s : series)
    for (size_t i = 0; i < s.x.size(); ++i) {
      x0 = std::min(x0, s.x[i]), x1 = std::max(x1, s.x[i]);
      y0 = std::min(y0, s.y[i]), y1 = std::max(y1, s.y[i]);
    }
  if (x0 > x1) throw DataError("plot: no data points to draw");
  if (x1 == x0) x1 = x0 + 1;
  if (y1 == y0) y1 = y0 + 1;
  auto px = [&](double x) { return L + (x - x0) / (x1 - x0) * (W - L - R); };
  auto py = [&](double y) { return H - B - (y - y0) / (y1 - y0) * (H - T - B); };
  static const char* colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd"};

  std::string svg = fmt("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\"", W) + fmt(" height=\"%.0f\"", H) +
                    " font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg += "<text x=\"" + fmt("%.0f", W / 2) + "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">" + title + "</text>\n";
  const double xs = tick_step(x1 - x0, 8), ys = tick_step(y1 - y0, 6);
  for (double x = std::ceil(x0 / xs) * xs; x <= x1 + 1e-9; x += xs)
    svg += "<line x1=\"" + fmt("%.1f", px(x)) + "\" y1=\"" + fmt("%.1f", T) + "\" x2=\"" + fmt("%.1f", px(x)) +
           "\" y2=\"" + fmt("%.1f", H - B) + "\" stroke=\"#eee\"/><text x=\"" + fmt("%.1f", px(x)) + "\" y=\"" +
           fmt("%.0f", H - B + 16) + "\" text-anchor=\"middle\">" + fmt("%g", x) + "</text>\n";
  for (double y = std::ceil(y0 / ys) * ys; y <= y1 + 1e-9; y += ys)
    svg += "<line x1=\"" + fmt("%.1f", L) + "\" y1=\"" + fmt("%.1f", py(y)) + "\" x2=\"" + fmt("%.1f", W - R) +
           "\" y2=\"" + fmt("%.1f", py(y)) + "\" stroke=\"#eee\"/><text x=\"" + fmt("%.0f", L - 6) + "\" y=\"" +
           fmt("%.1f", py(y) + 4) + "\" text-anchor=\"end\">" + fmt("%g", y) + "</text>\n";
  svg += "<text x=\"" + fmt("%.0f", W / 2) + "\" y=\"" + fmt("%.0f", H - 12) + "\" text-anchor=\"middle\">step</text>\n";
  svg += "<rect x=\"" + fmt("%.0f", L) + "\" y=\"" + fmt("%.0f", T) + "\" width=\"" + fmt("%.0f", W - L - R) +
         "\" height=\"" + fmt("%.0f", H - T - B) + "\" fill=\"none\" stroke=\"#888\"/>\n";
  for (size_t k = 0; k < series.size(); ++k) {
    const auto& s = series[k];
    const char* color = colors[k % 4];
    std::string points;
    for (size_t i = 0; i < s.x.size(); ++i) points += fmt("%.1f,", px(s.x[i])) + fmt("%.1f ", py(s.y[i]));
    svg += std::string("<polyline fill=\"none\" stroke=\"") + color + "\" stroke-width=\"1.6\" points=\"" + points +
           "\"/>\n";
    svg += "<text x=\"" + fmt("%.0f", W - R - 8) + "\" y=\"" + fmt("%.0f", T + 16 + 16.0 * double(k)) +
           "\" text-anchor=\"end\" fill=\"" + color + "\">" + s.name + "</text>\n";
  }
  return svg + "</svg>\n";
}

}  // namespace meshtrain
