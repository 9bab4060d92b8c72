#pragma once
// How the parameters are split across P parameter servers.
//
// Terms: the model's ParamStore is a run of V views in flat order. A shard is
// a contiguous run of whole views [first_view, end_view), hence a contiguous
// flat range [begin, end) of the parameter, gradient and optimizer-state
// buffers. Cutting on view boundaries keeps every optimizer exact on a shard:
// weight-decay exclusions, LARS/LAMB trust ratios and update chunks are all
// per view. Since every view starts on a ParamStore::kAlignElems boundary, a
// store that declares just the shard's views (make_shard_store) has the very
// layout of the flat range [begin, end): element i of the shard store is
// element begin + i of the full one.
//
// Server j owns shard j. Cut j (between shards j-1 and j) is the view
// boundary nearest to j * flat_size / P, so shards hold ~1/P of the
// elements each, as far as the view sizes allow.
#include <cstddef>
#include <memory>
#include <vector>

#include "meshtrain/core/param_store.hpp"

namespace meshtrain::parallel::ps {

struct ShardRange {
  size_t first_view = 0;  // views [first_view, end_view) of the full store
  size_t end_view = 0;
  size_t begin = 0;  // flat elements [begin, end), padding included
  size_t end = 0;
  size_t size() const { return end - begin; }
};

// P shards, each of at least one view, covering [0, store.flat_size()) in
// order. Throws ConfigError ("parallel.servers: ...") for P < 1 or P larger
// than the number of views.
std::vector<ShardRange> plan_shards(const ParamStore& store, int num_servers);

// An allocated store holding the shard's views (same names, shapes and
// weight-decay flags), with its parameters copied from `full` when `full`
// is allocated.
std::unique_ptr<ParamStore> make_shard_store(const ParamStore& full, const ShardRange& shard);

}  // namespace meshtrain::parallel::ps
