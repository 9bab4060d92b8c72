// A GPT's ParamStore units (what ZeRO shards and gathers by): its
// embeddings, one unit per block and the final norm; the blocks announce
// their forward and backward to the store's UnitObserver.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "meshtrain/core/param_store.hpp"
#include "meshtrain/nn/gpt.hpp"

namespace meshtrain {
namespace {

TEST(GptUnits, EmbeddingsBlocksAndFinalNorm) {
  Gpt gpt(GptConfig{.n_layer = 3, .n_embd = 16, .n_head = 2, .block_size = 8, .vocab_size = 64});
  const ParamStore& s = gpt.store();
  const auto& units = s.units();
  ASSERT_EQ(units.size(), 5u);
  // [wte, wpe], whole-step.
  EXPECT_TRUE(units[0].whole_step);
  ASSERT_EQ(units[0].end_view - units[0].first_view, 2u);
  EXPECT_EQ(s.view(units[0].first_view).name, "wte.weight");
  EXPECT_EQ(s.view(units[0].first_view + 1).name, "wpe.weight");
  // h.0 .. h.2: one unit each, 12 tensors, all named under the block.
  for (size_t b = 0; b < 3; ++b) {
    const ParamUnit& u = units[1 + b];
    const std::string prefix = "h." + std::to_string(b) + ".";
    EXPECT_EQ(u.name, "h." + std::to_string(b));
    EXPECT_FALSE(u.whole_step) << u.name;
    EXPECT_EQ(u.end_view - u.first_view, 12u) << u.name;
    for (size_t v = u.first_view; v < u.end_view; ++v)
      EXPECT_EQ(s.view(v).name.rfind(prefix, 0), 0u) << s.view(v).name << " in " << u.name;
  }
  // [ln_f.weight, ln_f.bias], whole-step.
  EXPECT_TRUE(units[4].whole_step);
  ASSERT_EQ(units[4].end_view - units[4].first_view, 2u);
  EXPECT_EQ(s.view(units[4].first_view).name, "ln_f.weight");
  EXPECT_EQ(s.view(units[4].first_view + 1).name, "ln_f.bias");
  EXPECT_EQ(units[4].end_view, s.views().size());
  // They tile the store.
  EXPECT_EQ(units[0].begin, 0u);
  for (size_t u = 0; u + 1 < units.size(); ++u) EXPECT_EQ(units[u].end, units[u + 1].begin);
  EXPECT_EQ(units.back().end, s.flat_size());
}

class Recorder final : public UnitObserver {
 public:
  void before_unit(size_t unit, UnitPass pass) override { events.emplace_back(unit, pass, true); }
  void after_unit(size_t unit, UnitPass pass) override { events.emplace_back(unit, pass, false); }
  std::vector<std::tuple<size_t, UnitPass, bool>> events;  // unit, pass, before?
};

TEST(GptUnits, BlocksAnnounceTheirForwardAndBackward) {
  Gpt gpt(GptConfig{.n_layer = 3, .n_embd = 16, .n_head = 2, .block_size = 8, .vocab_size = 64});
  Rng rng(7);
  gpt.init_parameters(rng);
  Batch batch;
  batch.batch_size = 2;
  batch.seq_len = 8;
  batch.tokens.ensure(16);
  batch.targets.ensure(16);
  for (int i = 0; i < 16; ++i) batch.tokens[i] = (i * 5) % 64, batch.targets[i] = (i * 5 + 5) % 64;
  Recorder rec;
  gpt.store().set_unit_observer(&rec);
  gpt.forward(batch);
  gpt.backward();
  gpt.store().set_unit_observer(nullptr);
  using E = std::tuple<size_t, UnitPass, bool>;
  const auto F = UnitPass::Forward, B = UnitPass::Backward;
  const std::vector<E> want = {E{1, F, true}, E{1, F, false}, E{2, F, true}, E{2, F, false}, E{3, F, true},
                               E{3, F, false}, E{3, B, true}, E{3, B, false}, E{2, B, true}, E{2, B, false},
                               E{1, B, true}, E{1, B, false}};
  EXPECT_EQ(rec.events, want);
}

}  // namespace
}  // namespace meshtrain
