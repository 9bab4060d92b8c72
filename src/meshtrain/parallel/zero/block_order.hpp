#pragma once
// The order in which a step enters ZeRO-3's blocks, for the prefetch: one
// step's record, followed by the next. Within a step the order repeats
// (every micro-batch's forward and backward, as the pipeline's schedule
// interleaves them), and it is the same from step to step, so the last
// step's record names the block needed after the one entered now, across
// micro-batches and between forward and backward, where the store's order
// cannot (the first block's forward after the last block's, under GPipe;
// a stage's warm-up forwards under 1F1B). The step re-records as it goes:
// a step that leaves the record (a different schedule, a resumed job's
// first step) is followed from the next one on.
#include <cstddef>
#include <optional>
#include <vector>

namespace meshtrain::parallel {

class BlockOrder {
 public:
  static constexpr size_t npos = size_t(-1);

  // At a step's start: the step before is the record to follow.
  void begin_step();
  // Entering block `unit`: records it. Returns the next block other than
  // `unit` that the record entered after this point (npos: none, the
  // step's end), or nothing where this step has left the record (or there
  // is none yet).
  std::optional<size_t> enter(size_t unit);
  // The block the record entered first (npos: no record).
  size_t first() const { return followed_.empty() ? npos : followed_.front(); }

 private:
  std::vector<size_t> followed_;  // the last step's
  std::vector<size_t> entered_;   // this step's so far
  bool on_record_ = false;
};

}  // namespace meshtrain::parallel
