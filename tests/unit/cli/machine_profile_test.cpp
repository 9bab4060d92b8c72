#include "meshtrain/cli/machine_profile.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "meshtrain/core/error.hpp"

namespace meshtrain::cli {
namespace {

// Samples of 2 alpha + bytes * beta at 4 KiB .. 16 MiB, doubling.
std::vector<LinkSample> exact_samples(double alpha, double beta) {
  std::vector<LinkSample> samples;
  for (double bytes = 4096; bytes <= 16 << 20; bytes *= 2) samples.push_back({bytes, 2 * alpha + bytes * beta});
  return samples;
}

TEST(FitRingOfTwo, RecoversAlphaAndBetaOfAnExactLink) {
  const double alpha = 10e-6, beta = 1 / 5e9;  // 10 us, 5 GB/s
  const LinkFit fit = fit_ring_of_two(exact_samples(alpha, beta));
  // Alpha from the small sizes carries their few bytes' worth of beta.
  EXPECT_NEAR(fit.alpha_s, alpha, 8192 * beta);
  EXPECT_NEAR(fit.beta_s_per_byte, beta, beta * 0.01);
}

// The failure that made least squares unusable: one large size at 1.8x its
// time (an 8 MiB call that lost the core) gave an intercept of ~1 ms.
TEST(FitRingOfTwo, OneSlowLargeSizeMovesNeitherAlphaNorBeta) {
  const double alpha = 10e-6, beta = 1 / 5e9;
  std::vector<LinkSample> samples = exact_samples(alpha, beta);
  samples[samples.size() - 2].seconds *= 1.8;
  const LinkFit fit = fit_ring_of_two(samples);
  EXPECT_NEAR(fit.alpha_s, alpha, 8192 * beta);
  EXPECT_NEAR(fit.beta_s_per_byte, beta, beta * 0.01);
}

TEST(FitRingOfTwo, OneSlowSmallSizeDoesNotMoveAlpha) {
  const double alpha = 10e-6, beta = 1 / 5e9;
  std::vector<LinkSample> samples = exact_samples(alpha, beta);
  samples[0].seconds = 1e-3;
  EXPECT_NEAR(fit_ring_of_two(samples).alpha_s, alpha, 16384 * beta);
}

TEST(FitRingOfTwo, OrderOfSamplesDoesNotMatter) {
  std::vector<LinkSample> samples = exact_samples(10e-6, 1 / 5e9);
  const LinkFit sorted = fit_ring_of_two(samples);
  std::reverse(samples.begin(), samples.end());
  const LinkFit reversed = fit_ring_of_two(samples);
  EXPECT_EQ(sorted.alpha_s, reversed.alpha_s);
  EXPECT_EQ(sorted.beta_s_per_byte, reversed.beta_s_per_byte);
}

TEST(FitRingOfTwo, FewerThanTwoSizesIsAnError) {
  EXPECT_THROW(fit_ring_of_two({{4096, 1e-5}}), Error);
}

}  // namespace
}  // namespace meshtrain::cli
