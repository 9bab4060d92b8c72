#pragma once
// Draws metrics from a run's JSONL file as an SVG line chart (loss and
// val_loss against step), so a person can look at a run instead of reading it.
#include <string>
#include <vector>

namespace meshtrain {

struct Series {
  std::string name;
  std::vector<double> x, y;
};

// Reads the `key` field of every record that has it, against its "step".
Series read_series(const std::string& metrics_path, const std::string& key);

// A self-contained SVG (no scripts, no external fonts) with one polyline per
// series, axes with tick labels, and a legend.
std::string render_svg(const std::vector<Series>& series, const std::string& title);

}  // namespace meshtrain
