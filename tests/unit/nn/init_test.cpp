// Initialization is partition-independent: a shard equals the slice of the
// one-process model's tensor with the same seed and name.
#include "meshtrain/nn/init.hpp"

#include <gtest/gtest.h>

namespace meshtrain::nn {
namespace {

TEST(Init, EveryShardIsTheSliceOfTheWholeTensor) {
  const Shape global{4, 6};
  ParamStore whole;
  const size_t w = whole.declare("h.0.attn.c_attn.weight", global, true);
  whole.allocate();
  fill_normal(whole, w, Rng(7), 0.02f);
  for (int parts : {1, 2, 3}) {
    for (int blocks : {1, 2}) {
      if (6 % (parts * blocks) != 0) continue;
      for (int r = 0; r < parts; ++r) {
        SCOPED_TRACE("parts " + std::to_string(parts) + " blocks " + std::to_string(blocks) + " rank " + std::to_string(r));
        ParamStore shard;
        const Placement p = Placement::sharded(1, parts, r, blocks);
        const size_t s = shard.declare("h.0.attn.c_attn.weight", global, true, p);
        shard.allocate();
        fill_normal(shard, s, Rng(7), 0.02f);
        for (size_t i = 0; i < shard.view(s).numel; ++i)
          ASSERT_EQ(shard.param(s)[i], whole.param(w)[global_index(global, p, i)]) << "element " << i;
      }
    }
  }
}

}  // namespace
}  // namespace meshtrain::nn
