#pragma once
// How a GPT's layers are cut into pipeline stages. S = P x V virtual stages
// (V chunks per rank, action.hpp) take consecutive layers; the first also
// holds the embeddings and the last ln_f, the tied output layer and the
// loss. Rank r runs the virtual stages r, P + r, ..., (V-1) P + r, as its
// pieces 0 .. V-1.
#include <cstdint>
#include <span>
#include <vector>

#include "meshtrain/nn/gpt.hpp"

namespace meshtrain::parallel::pipeline {

// Layers of each virtual stage. `given` empty: balanced, L / S each, the
// remainder one more each to the middle stages first (the first and last
// already hold the embedding and the head). Otherwise `given` must list S
// counts, each >= 0, that add up to L. Throws ConfigError naming the counts
// (stage_layers in messages) when they do not fit, and when a stage would
// hold nothing: no layer, and neither the embedding nor the head.
std::vector<int64_t> stage_layer_counts(int64_t layers, int stages, std::span<const int64_t> given = {});

// The pieces of pipeline rank `rank` of P with V chunks, for these counts.
std::vector<GptPiece> rank_pieces(std::span<const int64_t> counts, int P, int V, int rank);

}  // namespace meshtrain::parallel::pipeline
