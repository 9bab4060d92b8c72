#pragma once
// `meshtrain plot --per-rank`: the per-rank records of a run's metrics
// (rank_telemetry.hpp) as a heat map, workers down, log steps across, each
// cell coloured by how much longer the worker was busy than the fastest one
// (white: as fast; red: 3x or slower), its figures in the cell's tooltip.
#include <string>

namespace meshtrain {

// Throws DataError when the metrics file has no per-rank records.
std::string render_rank_heatmap_svg(const std::string& metrics_path);

}  // namespace meshtrain
