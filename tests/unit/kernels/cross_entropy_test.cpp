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
