// A mixture-of-experts layer's row moves (kernels/routed_rows.hpp) against
// loops written out here: gathers copy rows bit for bit; a combine adds each
// token's rows, scaled by their own rows' gates, in the order given, onto
// the base or onto zeros (tokens with no row keep the base); the gates'
// backward gives each row's dot product (in double) and its scaled output
// gradient.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "kernel_test_util.hpp"
#include "meshtrain/kernels/routed_rows.hpp"

namespace meshtrain::kernels {
namespace {

using testing::random_vector;

constexpr int64_t kTokens = 5, kWidth = 7;

// Token t's routed rows, in the order they are added: token 2 has none,
// token 0 three (out of row order), the others one or two.
struct TokenRoutes {
  std::vector<int32_t> start{0, 3, 4, 4, 6, 7};
  std::vector<int32_t> rows{5, 1, 3, 0, 2, 6, 4};
};

TEST(RoutedRows, GatherCopiesTheChosenRowsInOrder) {
  Rng rng(5);
  const std::vector<float> src = random_vector(kTokens * kWidth, rng);
  const std::vector<int32_t> rows{4, 0, 0, 2, 4, 1};
  std::vector<float> dst(rows.size() * kWidth, -9.0f);
  gather_rows(dst.data(), src.data(), rows.data(), int64_t(rows.size()), kWidth);
  for (size_t i = 0; i < rows.size(); ++i)
    EXPECT_EQ(0, std::memcmp(&dst[i * kWidth], &src[size_t(rows[i]) * kWidth], kWidth * sizeof(float))) << i;
}

TEST(RoutedRows, CombineAddsEachTokensScaledRowsInTheGivenOrder) {
  Rng rng(6);
  const TokenRoutes routes;
  const std::vector<float> src = random_vector(routes.rows.size() * kWidth, rng),
                           base = random_vector(kTokens * kWidth, rng),
                           scales = random_vector(routes.rows.size(), rng);
  for (bool with_base : {true, false})
    for (bool with_scales : {true, false}) {
      SCOPED_TRACE(std::string(with_base ? "base" : "zeros") + (with_scales ? ", scaled" : ", unscaled"));
      std::vector<float> want(kTokens * kWidth);
      for (int64_t t = 0; t < kTokens; ++t)
        for (int64_t c = 0; c < kWidth; ++c) {
          float acc = with_base ? base[size_t(t * kWidth + c)] : 0.0f;
          for (int32_t j = routes.start[size_t(t)]; j < routes.start[size_t(t) + 1]; ++j) {
            const int32_t row = routes.rows[size_t(j)];
            const float y = src[size_t(row * kWidth + c)];
            acc += with_scales ? scales[size_t(row)] * y : y;
          }
          want[size_t(t * kWidth + c)] = acc;
        }
      std::vector<float> out(kTokens * kWidth, -9.0f);
      combine_rows(out.data(), with_base ? base.data() : nullptr, src.data(), routes.start.data(), routes.rows.data(),
                   with_scales ? scales.data() : nullptr, kTokens, kWidth);
      EXPECT_EQ(0, std::memcmp(out.data(), want.data(), want.size() * sizeof(float)));
      // Token 2 has no row: its base, or zeros.
      EXPECT_EQ(out[2 * kWidth + 3], with_base ? base[2 * kWidth + 3] : 0.0f);
      // In place over the base.
      if (with_base) {
        std::vector<float> in_place = base;
        combine_rows(in_place.data(), in_place.data(), src.data(), routes.start.data(), routes.rows.data(),
                     with_scales ? scales.data() : nullptr, kTokens, kWidth);
        EXPECT_EQ(0, std::memcmp(in_place.data(), want.data(), want.size() * sizeof(float)));
      }
    }
}

TEST(RoutedRows, GateBackwardGivesEachRowsDotAndScaledGradient) {
  Rng rng(7);
  const std::vector<int32_t> tokens{3, 0, 3, 1};
  const std::vector<float> dout = random_vector(kTokens * kWidth, rng), y = random_vector(tokens.size() * kWidth, rng),
                           gates = random_vector(tokens.size(), rng);
  std::vector<float> dy(tokens.size() * kWidth, -9.0f), dgates(tokens.size(), -9.0f);
  gate_backward_rows(dy.data(), dgates.data(), dout.data(), y.data(), tokens.data(), gates.data(),
                     int64_t(tokens.size()), kWidth);
  for (size_t i = 0; i < tokens.size(); ++i) {
    double dot = 0;
    for (int64_t c = 0; c < kWidth; ++c) {
      const float d = dout[size_t(tokens[i] * kWidth + c)];
      dot += double(d) * double(y[i * kWidth + size_t(c)]);
      EXPECT_EQ(dy[i * kWidth + size_t(c)], gates[i] * d) << i << ", " << c;
    }
    EXPECT_EQ(dgates[i], float(dot)) << i;
  }
}

}  // namespace
}  // namespace meshtrain::kernels
