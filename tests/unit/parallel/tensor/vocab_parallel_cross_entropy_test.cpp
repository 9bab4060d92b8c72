// The vocabulary-parallel cross-entropy (each of T ranks, threads as ranks,
// holding V/T columns of the logits) against the serial SoftmaxCrossEntropy
// on the whole logits, T = 1, 2, 4: the loss (the same bits on every rank),
// the accuracy count (ties across shards included) and every rank's columns
// of dlogits. One rank gives the serial bits.
#include <gtest/gtest.h>

#include "meshtrain/nn/cross_entropy.hpp"
#include "meshtrain/nn/vocab_parallel_cross_entropy.hpp"
#include "tp_test_util.hpp"

namespace meshtrain::parallel {
namespace {

constexpr int64_t N = 7, V = 12;

// Rows of N(0, 3^2) logits; rows 0-2 have their target at the argmax (hits),
// rows 3 and 4 a maximum tied between columns 2 and 7 (different shards at
// T = 2 and 4): the serial argmax is the first, so target 2 hits and target
// 7 misses.
struct Problem {
  std::vector<float> logits;  // (N, V)
  std::vector<int32_t> targets{0, 0, 0, 2, 7, 11, 5};
};

Problem problem() {
  Problem p;
  Rng rng(13);
  p.logits.resize(N * V);
  for (float& x : p.logits) x = 3.0f * rng.normal();
  for (int64_t n : {3, 4}) p.logits[n * V + 2] = p.logits[n * V + 7] = 20.0f;
  for (int64_t n : {0, 1, 2}) {
    const auto row = p.logits.begin() + n * V;
    p.targets[n] = static_cast<int32_t>(std::max_element(row, row + V) - row);
  }
  return p;
}

// Columns [v0, v0 + cols) of the (N, V) matrix m, as (N, cols).
std::vector<float> columns(const std::vector<float>& m, int64_t v0, int64_t cols) {
  std::vector<float> out(N * cols);
  for (int64_t n = 0; n < N; ++n)
    std::copy(m.begin() + n * V + v0, m.begin() + n * V + v0 + cols, out.begin() + n * cols);
  return out;
}

TEST(VocabParallelCrossEntropy, EqualsTheSerialLoss) {
  const Problem p = problem();
  nn::SoftmaxCrossEntropy serial(kernels::cpu_backend());
  const ForwardResult want = serial.forward(p.logits.data(), p.targets.data(), N, V);
  std::vector<float> dlogits_serial(N * V);
  serial.backward(dlogits_serial.data());
  ASSERT_EQ(want.correct, 4) << "rows 0-2 and row 3 hit";

  for (int ways : {1, 2, 4}) {
    SCOPED_TRACE("T = " + std::to_string(ways));
    const int64_t cols = V / ways;
    std::vector<ForwardResult> got(static_cast<size_t>(ways));
    std::vector<std::vector<float>> dlogits(static_cast<size_t>(ways));
    tp_test::run_tensor_ranks(ways, [&](int r, TensorParallelGroup& tp) {
      nn::VocabParallelCrossEntropy xent(kernels::cpu_backend(), &tp, V);
      auto logits = columns(p.logits, xent.vocab_begin(), xent.vocab_columns());
      got[size_t(r)] = xent.forward(logits.data(), p.targets.data(), N);
      xent.backward(logits.data());  // in place, as the GPT runs it
      dlogits[size_t(r)] = std::move(logits);
    });
    for (int r = 0; r < ways; ++r) {
      SCOPED_TRACE("rank " + std::to_string(r));
      const ForwardResult& g = got[size_t(r)];
      if (ways == 1)
        EXPECT_EQ(g.loss, want.loss) << "one rank: the serial bits";
      else
        EXPECT_NEAR(g.loss, want.loss, 1e-5f * want.loss);
      EXPECT_EQ(g.loss, got[0].loss) << "every rank has the same loss";
      EXPECT_EQ(g.correct, want.correct);
      EXPECT_EQ(g.count, N);
      const auto want_cols = columns(dlogits_serial, r * cols, cols);
      EXPECT_EQ(tp_test::mismatches(dlogits[size_t(r)].data(), want_cols.data(), want_cols.size(),
                                    ways == 1 ? 0.0f : 1e-5f),
                0u)
          << "dlogits";
    }
  }
}

TEST(VocabParallelCrossEntropy, WithoutAGroupIsTheSerialLoss) {
  const Problem p = problem();
  nn::SoftmaxCrossEntropy serial(kernels::cpu_backend());
  nn::VocabParallelCrossEntropy xent(kernels::cpu_backend(), nullptr, V);
  const ForwardResult want = serial.forward(p.logits.data(), p.targets.data(), N, V);
  const ForwardResult got = xent.forward(p.logits.data(), p.targets.data(), N);
  EXPECT_EQ(got.loss, want.loss);
  EXPECT_EQ(got.correct, want.correct);
  std::vector<float> d_serial(N * V), d(N * V);
  serial.backward(d_serial.data());
  xent.backward(d.data());
  EXPECT_EQ(d, d_serial);
}

TEST(VocabParallelCrossEntropy, TargetsOutsideTheWholeVocabularyAreRejected) {
  const auto errors = tp_test::rank_errors(2, [&](int, TensorParallelGroup& tp) {
    nn::VocabParallelCrossEntropy xent(kernels::cpu_backend(), &tp, V);
    const std::vector<float> logits(2 * V / 2);
    const std::vector<int32_t> targets = {3, int32_t(V)};
    xent.forward(logits.data(), targets.data(), 2);
  });
  for (const auto& e : errors) EXPECT_NE(e.find("target 12 at row 1 is outside [0, 12)"), std::string::npos) << e;
}

TEST(VocabParallelCrossEntropy, AVocabularyThatDoesNotSplitIsAnError) {
  const auto errors =
      tp_test::rank_errors(2, [&](int, TensorParallelGroup& tp) { nn::VocabParallelCrossEntropy xent(kernels::cpu_backend(), &tp, 13); });
  for (const auto& e : errors)
    EXPECT_NE(e.find("a vocabulary of 13 does not split into the 2 tensor-parallel ways"), std::string::npos) << e;
}

}  // namespace
}  // namespace meshtrain::parallel
