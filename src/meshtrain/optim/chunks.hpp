#pragma once
// The unit of parallel work for every optimizer: a run of at most
// kUpdateChunkElems elements inside one view (padding between views is never
// touched). Chunk boundaries depend only on the store's layout, never on the
// thread count, so
//   - an element is always updated by the same code path (vector body or
//     tail), hence the same bits whatever OpenMP does;
//   - per-chunk partial sums added in chunk order give a per-view norm that
//     is identical for 1 or 64 threads.
#include <cstddef>
#include <vector>

#include "meshtrain/core/param_store.hpp"

namespace meshtrain {

inline constexpr size_t kUpdateChunkElems = 4096;

struct UpdateChunk {
  size_t begin = 0;  // flat element index, inclusive
  size_t end = 0;    // exclusive
  size_t view = 0;   // index into store.views()
  bool weight_decay = true;  // the view's flag, copied so hot loops skip a lookup
};

struct UpdateChunks {
  explicit UpdateChunks(const ParamStore& store);

  // Throws meshtrain::Error if store's layout is not the one these chunks cut.
  void check_layout(const ParamStore& store, const char* who) const;
  size_t size() const { return chunks.size(); }

  std::vector<UpdateChunk> chunks;  // in flat order
  // View v owns chunks [first[v], first[v + 1]); size views + 1.
  std::vector<size_t> first;
  size_t flat_size = 0;
};

// Sum of x[i]^2 in double with a fixed association (8 interleaved lanes,
// combined in lane order), so the same n values always give the same bits.
double sum_squares(const float* x, size_t n);

}  // namespace meshtrain
