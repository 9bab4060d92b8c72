#pragma once
// How ZeRO splits a ParamStore across the ranks of a data-parallel group:
// unit by unit, as FSDP does. Each unit (a transformer block, the
// embeddings: ParamStore::units()) is cut into `world` equal slices of
// `slice` elements (the last ones padded past the unit's end); rank r owns
// slice r of every unit. Its shard buffers (parameters, gradients, optimizer
// state) hold its slices one after the other, padding included, so
//   - a unit's all-gather reads the rank's slice in place and writes the
//     whole unit (world * slice elements) into a gather buffer, and its
//     reduce-scatter reads a gather-sized gradient buffer and writes the
//     rank's slice in place;
//   - every rank's shard is within one slice per unit of flat_size / world.
// The split depends only on the store's layout and the world size.
#include <cstddef>
#include <vector>

#include "meshtrain/core/flat_segment.hpp"
#include "meshtrain/core/param_store.hpp"

namespace meshtrain::parallel {

struct UnitShard {
  size_t unit = 0;            // index into ParamStore::units()
  size_t begin = 0, end = 0;  // the unit's flat range
  size_t slice = 0;           // elements per rank, a multiple of ParamStore::kAlignElems
  size_t local = 0;           // where this rank's slice starts in its shard buffers
  FlatSegment owned;          // this rank's elements of the unit (empty when the padding covers its slice)
  bool whole_step = false;
  // Whole-step units: where this one's gathered copy starts in a buffer of
  // all of them (whole_step_gathered_size()). Blocks: the block's index
  // among the blocks, which picks one of two alternating buffers.
  size_t whole_step_offset = 0;
  size_t block_ordinal = 0;
  size_t elements() const { return end - begin; }
};

class ShardLayout {
 public:
  // Throws Error for a world size < 1 or a rank outside it.
  ShardLayout(const ParamStore& store, int rank, int world);

  int rank() const { return rank_; }
  int world() const { return world_; }
  const std::vector<UnitShard>& units() const { return units_; }
  const UnitShard& unit(size_t index) const { return units_[index]; }
  // The rank's non-empty owned segments, in flat order (what its optimizer updates).
  const FlatSegments& segments() const { return segments_; }
  // Elements of each shard buffer: the sum of the slices.
  size_t local_size() const { return local_size_; }
  // Elements of one unit gathered (world * slice).
  size_t gathered_size(const UnitShard& u) const { return u.slice * size_t(world_); }
  // The largest gathered_size over units that are (or are not) whole-step.
  size_t max_gathered_size(bool whole_step) const;
  // Sum of gathered_size over the whole-step units.
  size_t whole_step_gathered_size() const;

 private:
  int rank_ = 0, world_ = 1;
  std::vector<UnitShard> units_;
  FlatSegments segments_;
  size_t local_size_ = 0;
};

}  // namespace meshtrain::parallel
