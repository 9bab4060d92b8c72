#include "meshtrain/kernels/cross_entropy.hpp"

#include "kernel_test_util.hpp"

namespace meshtrain::kernels {
namespace {

using namespace testing;

double xent_ref(const std::vector<double>& z, const std::vector<int32_t>& tgt, int64_t N, int64_t V) {
  double total = 0;
  for (int64_t n = 0; n < N; ++n) {
    double mx = -1e300, sum = 0;
    for (int64_t j = 0; j < V; ++j) mx = std::max(mx, z[n * V + j]);
    for (int64_t j = 0; j < V; ++j) sum += std::exp(z[n * V + j] - mx);
    total += mx + std::log(sum) - z[n * V + tgt[n]];
  }
  return total / N;
}

TEST(CrossEntropyKernel, ForwardAndBackwardMatchReference) {
  for (auto [N, V] : {std::pair<int64_t, int64_t>{1, 1}, {4, 3}, {7, 50}, {33, 256}}) {
    Rng rng(N * V);
    auto z = random_vector(N * V, rng, 3.0f);
    std::vector<int32_t> tgt(N);
    for (auto& t : tgt) t = static_cast<int32_t>(rng.below(V));
    std::vector<float> lse(N), loss(N), hit(N, -1.0f);
    softmax_xent_forward(lse.data(), loss.data(), hit.data(), z.data(), tgt.data(), N, V);
    double mean = 0;
    std::vector<float> want_hit(N);
    for (int64_t n = 0; n < N; ++n) {
      mean += loss[n] / N;
      int64_t arg = 0;
      for (int64_t j = 1; j < V; ++j)
        if (z[n * V + j] > z[n * V + arg]) arg = j;
      want_hit[n] = arg == tgt[n] ? 1.0f : 0.0f;
    }
    EXPECT_NEAR(mean, xent_ref(to_double(z), tgt, N, V), 1e-5);
    EXPECT_EQ(hit, want_hit);

    std::vector<float> dz(N * V);
    softmax_xent_backward(dz.data(), z.data(), lse.data(), tgt.data(), N, V, 1.0f / N);
    auto g = numeric_grad([&](const auto& v) { return xent_ref(v, tgt, N, V); }, to_double(z));
    expect_close(dz, g, 1e-5, 1e-4, "dlogits");
    softmax_xent_backward(z.data(), z.data(), lse.data(), tgt.data(), N, V, 1.0f / N);  // in place
    expect_close(z, dz, 0, 0, "in-place dlogits");
  }
}

// The vocabulary-parallel steps (row max and argmax per shard, argmax
// candidates, exp sums, loss rows), the shards' all-reduces done here by
// hand: one shard of the whole row gives softmax_xent_forward's bits; two
// shards its hits exactly (a max tied across them included) and its lse
// and loss to float rounding.
std::vector<float> shard_forward(const std::vector<float>& z, const std::vector<int32_t>& tgt, int64_t N, int64_t V,
                                 int shards) {
  const int64_t cols = V / shards;
  std::vector<std::vector<float>> parts(shards, std::vector<float>(N * cols)), local(shards, std::vector<float>(N));
  std::vector<std::vector<int32_t>> arg(shards, std::vector<int32_t>(N));
  std::vector<float> mx(N, -1e30f);
  for (int r = 0; r < shards; ++r) {
    for (int64_t n = 0; n < N; ++n)
      std::copy(z.begin() + n * V + r * cols, z.begin() + n * V + (r + 1) * cols, parts[r].begin() + n * cols);
    row_max_argmax(local[r].data(), arg[r].data(), parts[r].data(), N, cols);
    for (int64_t n = 0; n < N; ++n) mx[n] = std::max(mx[n], local[r][n]);  // all-reduce max
  }
  std::vector<int32_t> best(N, int32_t(V));
  std::vector<float> sumexp(N, 0.0f), target(N, 0.0f);
  for (int r = 0; r < shards; ++r) {
    shard_argmax_candidates(arg[r].data(), local[r].data(), mx.data(), N, r * cols, V);
    std::vector<float> s(N), t(N);
    softmax_xent_shard_sums(s.data(), t.data(), parts[r].data(), mx.data(), tgt.data(), N, cols, r * cols);
    for (int64_t n = 0; n < N; ++n) {  // all-reduce min and sum
      best[n] = std::min(best[n], arg[r][n]);
      sumexp[n] += s[n];
      target[n] += t[n];
    }
  }
  std::vector<float> out(3 * N);  // lse, loss, hit
  shard_loss_rows(out.data(), out.data() + N, out.data() + 2 * N, mx.data(), sumexp.data(), target.data(),
                  best.data(), tgt.data(), N);
  return out;
}

TEST(CrossEntropyKernel, VocabularyShardsGiveTheWholeRowsForward) {
  constexpr int64_t N = 9, V = 40;
  Rng rng(77);
  auto z = random_vector(N * V, rng, 3.0f);
  z[2 * V + 5] = z[2 * V + 30] = 50.0f;  // row 2's max tied across the two shards: the first wins
  std::vector<int32_t> tgt(N);
  for (auto& t : tgt) t = static_cast<int32_t>(rng.below(V));
  tgt[2] = 5;
  std::vector<float> whole(3 * N);
  softmax_xent_forward(whole.data(), whole.data() + N, whole.data() + 2 * N, z.data(), tgt.data(), N, V);
  const std::vector<float> one = shard_forward(z, tgt, N, V, 1);
  EXPECT_EQ(one, whole);
  const std::vector<float> two = shard_forward(z, tgt, N, V, 2);
  for (int64_t i = 0; i < 2 * N; ++i) EXPECT_NEAR(two[i], whole[i], 1e-5f * std::max(1.0f, std::abs(whole[i])));
  EXPECT_EQ(std::vector<float>(two.begin() + 2 * N, two.end()), std::vector<float>(whole.begin() + 2 * N, whole.end()));
  EXPECT_EQ(two[2 * N + 2], 1.0f);
}

TEST(CrossEntropyKernel, StableForHugeLogits) {
  std::vector<float> z = {1e4f, -1e4f, 0.0f, 3e4f};
  std::vector<int32_t> tgt = {0, 0};  // row 0 right, row 1 wrong by 3e4
  std::vector<float> lse(2), loss(2), hit(2, -1.0f);
  softmax_xent_forward(lse.data(), loss.data(), hit.data(), z.data(), tgt.data(), 2, 2);
  EXPECT_EQ(hit, (std::vector<float>{1.0f, 0.0f}));
  EXPECT_NEAR(loss[0], 0.0f, 1e-6);
  EXPECT_NEAR(loss[1], 3e4f, 1.0f);
}

}  // namespace
}  // namespace meshtrain::kernels
