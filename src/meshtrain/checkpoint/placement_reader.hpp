#pragma once
// Reads a checkpoint saved at another tensor-parallel or pipeline layout
// into this rank's layout, by placement (core/param_store.hpp's Placement), never by
// flat index: flat ranges cannot describe a column shard or the blocked
// q/k/v shard of c_attn. Each tensor is assembled whole from the saved
// ranks' parts, then this rank's slice of it is taken. So a checkpoint
// written at T tensor ways loads at T' ways, into one process (consolidate,
// eval, generate), or from one process into T ways; a pipeline stage's
// rank holds some layers only, so a tensor is taken from the saved ranks
// that hold it (pipeline resharding by layer). Optimizer state buffers are
// placed like the parameters they belong to.
#include <memory>
#include <vector>

#include "meshtrain/checkpoint/flat_shards.hpp"
#include "meshtrain/core/param_store.hpp"

namespace meshtrain::checkpoint {

// One saved rank (a tensor-parallel rank of a pipeline stage): the layout its store had (views with
// their placements; parameters need not be allocated) and a reader of its
// buffers in that layout.
struct SavedTensorRank {
  std::unique_ptr<ParamStore> layout;  // the reader may keep a reference to it
  std::unique_ptr<FlatRangeReader> reader{};
};

// A reader in `target`'s layout over the saved ranks (each stage's tensor
// ranks in order). Each view of `target` must exist under the same name and
// global shape in at least one saved layout, and nowhere with another
// shape; CheckpointError naming the tensor otherwise.
// A buffer is assembled in full on its first read (one flat buffer of the
// target's size is kept, for the buffer read last).
std::unique_ptr<FlatRangeReader> open_resharded(std::vector<SavedTensorRank> saved, const ParamStore& target);

// A store with `source`'s views (names, global shapes, placements, weight
// decay) in the same flat layout, not allocated: what a saved rank's layout
// needs. With `tensor_index` >= 0 every sharded view's placement index is
// set to it (the layout of another rank of the same group).
std::unique_ptr<ParamStore> layout_copy(const ParamStore& source, int tensor_index = -1);

}  // namespace meshtrain::checkpoint
