// `meshtrain plot METRICS.jsonl [--keys loss,val_loss] [--out FILE.svg]`, or
// `meshtrain plot TRACE.json [--out FILE.svg]` for a pipeline timeline, or
// `meshtrain plot METRICS.jsonl --per-rank` for the workers' heat map.
#include <fstream>
#include <memory>
#include <sstream>

#include "meshtrain/cli/commands.hpp"
#include "meshtrain/core/error.hpp"
#include "meshtrain/train/report/rank_heatmap_svg.hpp"
#include "meshtrain/train/report/svg_plot.hpp"
#include "meshtrain/train/report/timeline_svg.hpp"

namespace meshtrain::cli {
namespace {

struct PlotArgs {
  std::string metrics;
  std::vector<std::string> keys = {"loss", "val_loss"};
  std::string out;
  bool per_rank = false;
};

void write_svg(const std::string& out, const std::string& svg) {
  std::ofstream f(out);
  f << svg;
  if (!f) throw IoError(out + ": cannot write");
  std::printf("%s\n", out.c_str());
}

}  // namespace

void add_plot_command(CLI::App& app, CommandSet& commands) {
  auto args = std::make_shared<PlotArgs>();
  CLI::App* sub = app.add_subcommand(
      "plot", "Draw metrics of a run (loss curves), or a pipeline trace (metrics.trace) as a timeline, as SVG");
  sub->add_option("metrics", args->metrics, "a run's metrics.jsonl, or a pipeline trace JSON")->required();
  sub->add_option("--keys", args->keys, "metrics to draw against step")->delimiter(',');
  sub->add_flag("--per-rank", args->per_rank,
                "draw the workers' busy time per step against the fastest worker's as a heat map (workers x steps; "
                "the per-rank records of a job of several workers)");
  sub->add_option("--out", args->out, "SVG file to write (default: beside the metrics, <name>.svg)");
  commands.add(sub, [args] {
    const std::string stem = args->metrics.substr(0, args->metrics.rfind('.'));
    const std::string out = !args->out.empty() ? args->out : stem + (args->per_rank ? "-ranks.svg" : ".svg");
    if (args->per_rank) {
      write_svg(out, render_rank_heatmap_svg(args->metrics));
      return 0;
    }
    std::ifstream in(args->metrics);
    if (!in) throw IoError(args->metrics + ": cannot read");
    std::stringstream text;
    text << in.rdbuf();
    if (text.str().find("\"traceEvents\"") != std::string::npos) {
      std::ofstream f(out);
      f << render_timeline_svg(text.str(), args->metrics);
      if (!f) throw IoError(out + ": cannot write");
      std::printf("%s\n", out.c_str());
      return 0;
    }
    std::vector<Series> series;
    for (const auto& key : args->keys) {
      Series s = read_series(args->metrics, key);
      if (!s.x.empty()) series.push_back(std::move(s));
    }
    if (series.empty()) throw DataError(args->metrics + ": none of the keys has data points");
    std::ofstream f(out);
    f << render_svg(series, args->metrics);
    if (!f) throw IoError(out + ": cannot write");
    std::printf("%s\n", out.c_str());
    return 0;
  });
}

}  // namespace meshtrain::cli
