#pragma once
// The unit of parallel work for every optimizer: a run of at most
// kUpdateChunkElems elements inside one view (padding between views is never
// touched) and inside one of the segments the optimizer owns (all of the
// store, or a ZeRO shard). Chunks are cut at multiples of kUpdateChunkElems
// from the start of their view, so a shard's chunks are the whole store's
// chunks, split further only where a shard boundary falls. Boundaries depend
// only on the layout, never on the thread count, so
//   - an element is always updated by the same code path (vector body or
//     tail), hence the same bits whatever OpenMP does;
//   - per-chunk partial sums added in chunk order give a per-view norm that
//     is identical for 1 or 64 threads.
#include <cstddef>
#include <span>
#include <vector>

#include "meshtrain/core/flat_segment.hpp"
#include "meshtrain/core/param_store.hpp"

namespace meshtrain {

inline constexpr size_t kUpdateChunkElems = 4096;

struct UpdateChunk {
  size_t flat = 0;    // first element's index in the flat layout
  size_t local = 0;   // ... and in the shard layout (optimizer state)
  size_t size = 0;    // elements
  size_t view = 0;    // index into store.views()
  bool weight_decay = true;  // the view's flag, copied so hot loops skip a lookup
};

struct UpdateChunks {
  // The chunks of `segments` (sorted, disjoint), or of the whole store.
  explicit UpdateChunks(const ParamStore& store);
  UpdateChunks(const ParamStore& store, std::span<const FlatSegment> segments);

  // Throws meshtrain::Error if store's layout is not the one these chunks cut.
  void check_layout(const ParamStore& store, const char* who) const;
  size_t size() const { return chunks.size(); }

  std::vector<UpdateChunk> chunks;  // in flat order
  // View v owns chunks [first[v], first[v + 1]); size views + 1.
  std::vector<size_t> first;
  size_t flat_size = 0;
  size_t local_size = 0;  // elements of each shard buffer (state, shard parameters)
};

}  // namespace meshtrain
