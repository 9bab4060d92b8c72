#include "meshtrain/parallel/pipeline/stage_split.hpp"

#include <numeric>
#include <string>

#include "meshtrain/core/error.hpp"

namespace meshtrain::parallel::pipeline {
namespace {

std::string list(std::span<const int64_t> counts) {
  std::string s = "[";
  for (size_t i = 0; i < counts.size(); ++i) s += (i ? ", " : "") + std::to_string(counts[i]);
  return s + "]";
}

}  // namespace

std::vector<int64_t> stage_layer_counts(int64_t layers, int stages, std::span<const int64_t> given) {
  if (stages < 1) throw ConfigError("pipeline: needs at least one stage, got " + std::to_string(stages));
  std::vector<int64_t> counts;
  if (given.empty()) {
    counts.assign(size_t(stages), layers / stages);
    // The remainder goes to the middle stages first, then the last, then the first.
    std::vector<int> order;
    for (int s = 1; s + 1 < stages; ++s) order.push_back(s);
    if (stages > 1) order.push_back(stages - 1);
    order.push_back(0);
    for (int64_t extra = layers % stages, i = 0; extra > 0; --extra, ++i) ++counts[size_t(order[size_t(i)])];
  } else {
    counts.assign(given.begin(), given.end());
    const int64_t sum = std::accumulate(counts.begin(), counts.end(), int64_t{0});
    bool negative = false;
    for (int64_t c : counts) negative = negative || c < 0;
    if (counts.size() != size_t(stages) || sum != layers || negative)
      throw ConfigError("parallel.stage_layers = " + list(counts) + " must list " + std::to_string(stages) +
                        " layer counts (pipeline x virtual_stages), none negative, adding up to model.n_layer = " +
                        std::to_string(layers));
  }
  for (int s = 1; s + 1 < stages; ++s)
    if (counts[size_t(s)] == 0)
      throw ConfigError("pipeline: stage " + std::to_string(s) + " of " + std::to_string(stages) +
                        " would hold no layer (stage layers " + list(counts) + ", model.n_layer = " +
                        std::to_string(layers) + "): use fewer stages or more layers");
  return counts;
}

std::vector<GptPiece> rank_pieces(std::span<const int64_t> counts, int P, int V, int rank) {
  const int S = P * V;
  if (counts.size() != size_t(S))
    throw Error("pipeline: " + std::to_string(counts.size()) + " stage layer counts for " + std::to_string(S) +
                " virtual stages");
  std::vector<int64_t> first(size_t(S) + 1, 0);
  for (int s = 0; s < S; ++s) first[size_t(s) + 1] = first[size_t(s)] + counts[size_t(s)];
  std::vector<GptPiece> pieces;
  for (int c = 0; c < V; ++c) {
    const int s = c * P + rank;
    pieces.push_back({.first_layer = first[size_t(s)],
                      .end_layer = first[size_t(s) + 1],
                      .embedding = s == 0,
                      .head = s == S - 1});
  }
  return pieces;
}

}  // namespace meshtrain::parallel::pipeline
