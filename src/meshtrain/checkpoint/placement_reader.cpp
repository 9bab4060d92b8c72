#include "meshtrain/checkpoint/placement_reader.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "meshtrain/core/error.hpp"
#include "meshtrain/core/shape.hpp"

namespace meshtrain::checkpoint {
namespace {

class ReshardedReader final : public FlatRangeReader {
 public:
  ReshardedReader(std::vector<SavedTensorRank> saved, const ParamStore& target)
      : saved_(std::move(saved)), target_(target) {
    if (saved_.empty()) throw CheckpointError("resharding a checkpoint: no saved ranks");
    for (const ParamView& view : target_.views()) {
      bool held = false;
      for (size_t t = 0; t < saved_.size(); ++t) {
        const ParamView* s = saved_[t].layout->find(view.name);
        if (s && s->global_shape != view.global_shape)
          throw CheckpointError("checkpoint rank " + std::to_string(t) + " has another shape for tensor '" +
                                view.name + "': " + shape_string(s->global_shape) + ", this model " +
                                shape_string(view.global_shape));
        held = held || s;
      }
      if (!held) throw CheckpointError("no rank of the checkpoint holds tensor '" + view.name + "'");
    }
  }

  bool has(std::string_view buffer) const override { return saved_.front().reader->has(buffer); }

  void read(std::string_view buffer, size_t begin, size_t end, float* out) const override {
    if (end > target_.flat_size() || begin > end)
      throw CheckpointError("resharded read [" + std::to_string(begin) + ", " + std::to_string(end) +
                            ") outside the flat layout of " + std::to_string(target_.flat_size()));
    if (buffer != cached_name_) assemble(buffer);
    std::memcpy(out, cached_.data() + begin, (end - begin) * sizeof(float));
  }

 private:
  // The whole target flat buffer of `buffer`, one tensor at a time.
  void assemble(std::string_view buffer) const {
    cached_.assign(target_.flat_size(), 0.0f);
    std::vector<float> whole, part;
    for (const ParamView& view : target_.views()) {
      whole.assign(static_cast<size_t>(numel(view.global_shape)), 0.0f);
      for (const SavedTensorRank& rank : saved_) {
        const ParamView* held = rank.layout->find(view.name);
        if (!held) continue;  // another pipeline stage's tensor
        const ParamView& s = *held;
        part.resize(s.numel);
        rank.reader->read(buffer, s.offset, s.offset + s.numel, part.data());
        for (size_t i = 0; i < s.numel; ++i) whole[global_index(s.global_shape, s.placement, i)] = part[i];
        if (s.placement.replicated()) break;  // every rank holds the same tensor
      }
      float* dst = cached_.data() + view.offset;
      for (size_t i = 0; i < view.numel; ++i) dst[i] = whole[global_index(view.global_shape, view.placement, i)];
    }
    cached_name_ = std::string(buffer);
  }

  std::vector<SavedTensorRank> saved_;
  const ParamStore& target_;
  mutable std::string cached_name_;
  mutable std::vector<float> cached_;
};

}  // namespace

std::unique_ptr<FlatRangeReader> open_resharded(std::vector<SavedTensorRank> saved, const ParamStore& target) {
  return std::make_unique<ReshardedReader>(std::move(saved), target);
}

std::unique_ptr<ParamStore> layout_copy(const ParamStore& source, int tensor_index) {
  auto layout = std::make_unique<ParamStore>();
  for (const ParamView& v : source.views()) {
    Placement p = v.placement;
    if (tensor_index >= 0 && !p.replicated()) p.index = tensor_index;
    layout->declare(v.name, v.global_shape, v.weight_decay, p);
  }
  return layout;
}

}  // namespace meshtrain::checkpoint
