#include "meshtrain/parallel/parameter_server/shard_plan.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "meshtrain/core/error.hpp"

namespace meshtrain::parallel::ps {
namespace {

// Flat offset where view k starts; V (one past the last view) is flat_size.
size_t boundary(const ParamStore& store, size_t k) {
  return k < store.views().size() ? store.view(k).offset : store.flat_size();
}

}  // namespace

std::vector<ShardRange> plan_shards(const ParamStore& store, int num_servers) {
  const size_t V = store.views().size();
  if (num_servers < 1)
    throw ConfigError("parallel.servers: need at least 1 parameter server, got " + std::to_string(num_servers));
  const size_t P = static_cast<size_t>(num_servers);
  if (P > V)
    throw ConfigError("parallel.servers: " + std::to_string(P) + " parameter servers but the model has only " +
                      std::to_string(V) + " tensors (each server holds whole tensors)");
  // cut[j] is the first view of shard j; cut[P] = V.
  std::vector<size_t> cut(P + 1, 0);
  cut[P] = V;
  const double flat = static_cast<double>(store.flat_size());
  for (size_t j = 1; j < P; ++j) {
    const double target = flat * static_cast<double>(j) / static_cast<double>(P);
    // Leave at least one view for this shard and for each shard after it.
    const size_t lo = cut[j - 1] + 1, hi = V - (P - j);
    size_t best = lo;
    for (size_t k = lo; k <= hi; ++k)
      if (std::abs(static_cast<double>(boundary(store, k)) - target) <
          std::abs(static_cast<double>(boundary(store, best)) - target))
        best = k;
    cut[j] = best;
  }
  std::vector<ShardRange> shards(P);
  for (size_t j = 0; j < P; ++j)
    shards[j] = ShardRange{.first_view = cut[j], .end_view = cut[j + 1], .begin = boundary(store, cut[j]),
                           .end = boundary(store, cut[j + 1])};
  return shards;
}

std::unique_ptr<ParamStore> make_shard_store(const ParamStore& full, const ShardRange& shard) {
  auto out = std::make_unique<ParamStore>();
  for (size_t v = shard.first_view; v < shard.end_view; ++v) {
    const ParamView& view = full.view(v);
    out->declare(view.name, view.shape, view.weight_decay);
  }
  out->allocate();
  if (out->flat_size() != shard.size())
    throw Error("parameter server: shard of views [" + std::to_string(shard.first_view) + ", " +
                std::to_string(shard.end_view) + ") lays out " + std::to_string(out->flat_size()) +
                " elements, expected " + std::to_string(shard.size()));
  if (full.allocated() && shard.size() > 0)
    std::memcpy(out->params().data(), full.params().data() + shard.begin, shard.size() * sizeof(float));
  return out;
}

}  // namespace meshtrain::parallel::ps
