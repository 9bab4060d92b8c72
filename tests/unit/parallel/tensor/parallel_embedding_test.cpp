// The vocabulary-parallel embedding (wte split by rows over T ranks, threads
// as ranks) against the serial embedding with the same seed, T = 1, 2, 4:
// the output and every gradient slice are the serial bits (each token's row
// comes from one rank, the others add exact zeros; wpe is added once).
#include <gtest/gtest.h>

#include "meshtrain/nn/embedding.hpp"
#include "tp_test_util.hpp"

namespace meshtrain::parallel {
namespace {

constexpr int64_t V = 12, kMaxT = 5, C = 20, B = 3, T = 4;  // C: two threads' column ranges and a remainder

std::vector<int32_t> tokens() {
  // Every shard at T = 4 gets some tokens, and token 7 repeats (its gradient rows add up).
  return {0, 7, 3, 11, 7, 5, 9, 1, 7, 2, 10, 6};
}

std::vector<float> values(size_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = rng.normal();
  return v;
}

// Output (B, T, C) of forward (dout's rows: all, or a rank's under sequence
// parallelism), then backward of dout into the store's gradients.
std::vector<float> run(nn::Embedding& embed, const std::vector<int32_t>& tok, const std::vector<float>& dout) {
  const float* y = embed.forward(tok.data(), B, T);
  std::vector<float> out(y, y + dout.size());
  embed.backward(dout.data());
  return out;
}

// At T = 1, 2, 4: the output and every gradient slice are the serial bits.
// Under sequence parallelism the lookup is reduce-scattered to each rank's
// rows (3 rows at T = 4, crossing sequences), wpe is added to those rows by
// position, and backward gathers dout: still the serial bits, rank r's output
// the serial rows [r N/T, (r+1) N/T), wpe's gradient whole on every rank.
void expect_serial_bits(bool sequence_parallel) {
  const auto tok = tokens();
  const auto dout = values(B * T * C, 2);
  ParamStore serial_store;
  nn::Embedding serial(serial_store, "wte.weight", "wpe.weight", V, kMaxT, C);
  serial_store.allocate();
  Rng rng(5);
  serial.init(rng, 0.5f);
  const auto y_serial = run(serial, tok, dout);

  for (int ways : {1, 2, 4}) {
    SCOPED_TRACE("T = " + std::to_string(ways));
    std::vector<ParamStore> stores(static_cast<size_t>(ways));
    std::vector<std::vector<float>> y(static_cast<size_t>(ways));
    tp_test::run_tensor_ranks(
        ways,
        [&](int r, TensorParallelGroup& tp) {
          ParamStore& store = stores[size_t(r)];
          nn::Embedding embed(store, "wte.weight", "wpe.weight", V, kMaxT, C, &tp);
          store.allocate();
          Rng init(5);
          embed.init(init, 0.5f);
          y[size_t(r)] = run(embed, tok, tp_test::rank_part(dout, r, ways, sequence_parallel));
        },
        sequence_parallel);
    for (int r = 0; r < ways; ++r) {
      SCOPED_TRACE("rank " + std::to_string(r));
      const ParamStore& store = stores[size_t(r)];
      EXPECT_EQ(store.find("wte.weight")->shape, (Shape{V / ways, C}));
      EXPECT_EQ(store.find("wte.weight")->placement.dim, 0);
      EXPECT_TRUE(store.find("wpe.weight")->placement.replicated());
      const auto want = tp_test::rank_part(y_serial, r, ways, sequence_parallel);
      ASSERT_EQ(y[size_t(r)].size(), want.size());
      EXPECT_EQ(tp_test::mismatches(y[size_t(r)].data(), want.data(), want.size(), 0.0f), 0u) << "output";
      for (const ParamView& v : store.views())
        EXPECT_EQ(tp_test::grad_slice_mismatches(store, v, serial_store, 0.0f), 0u) << v.name << " gradient";
    }
  }
}

TEST(VocabParallelEmbedding, EqualsTheSerialEmbeddingBitwise) { expect_serial_bits(false); }

TEST(VocabParallelEmbedding, SequenceParallelRowsAreTheSerialRowsBitwise) { expect_serial_bits(true); }

TEST(VocabParallelEmbedding, TokensOutsideTheWholeVocabularyAreRejected) {
  const auto errors = tp_test::rank_errors(2, [&](int, TensorParallelGroup& tp) {
    ParamStore store;
    nn::Embedding embed(store, "wte.weight", "wpe.weight", V, kMaxT, C, &tp);
    store.allocate();
    const std::vector<int32_t> tok = {1, int32_t(V)};  // V is past every rank's rows, not just this one's
    embed.forward(tok.data(), 1, 2);
  });
  for (const auto& e : errors)
    EXPECT_NE(e.find("token 12 at position 1 is outside the vocabulary [0, 12)"), std::string::npos) << e;
}

}  // namespace
}  // namespace meshtrain::parallel
