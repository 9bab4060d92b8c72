// The CUDA global norm and clipping (kernels/cuda/global_norm.hpp): the sum
// of squares against a double-precision sum (what optim/clip.cpp computes,
// up to association), the same bits on a second run, the clip factor with
// clip_factor's bits, and the scaling bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "gpu_test_util.hpp"
#include "kernel_compare.hpp"
#include "meshtrain/kernels/clip_math.hpp"
#include "meshtrain/kernels/cuda/global_norm.hpp"

namespace meshtrain::kernels::cuda {
namespace {

using test::bits_of;
using test::expect_same_bits;
using test::poisoned;
using test::random_floats;
using test::to_device;
using test::to_host;

double sum_squares(const float* x, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; ++i) s += double(x[i]) * double(x[i]);
  return s;
}

float device_sumsq(CudaAllocator& alloc, const float* x, int64_t n) {
  auto partials = poisoned<double>(alloc, size_t(kGlobalNormPartials));
  auto out = poisoned<float>(alloc, 1);
  global_norm_squared(out.ptr().raw(), partials.ptr().raw(), x, n, nullptr);
  return to_host(out)[0];
}

TEST(CudaGlobalNorm, SumOfSquaresMatchesDoubleAndRepeats) {
  MESHTRAIN_REQUIRE_GPU();
  CudaAllocator alloc;
  const std::vector<float> x = random_floats(3000017, 31, -2.0f, 2.0f);
  auto d_x = to_device(alloc, x);
  // Aligned (packs of 4), unaligned (element by element), small, empty.
  const struct {
    size_t offset, n;
  } cases[] = {{0, x.size()}, {1, x.size() - 1}, {3, 1001}, {0, 5}, {0, 0}};
  for (const auto& c : cases) {
    SCOPED_TRACE("offset " + std::to_string(c.offset) + ", n " + std::to_string(c.n));
    const float want = float(sum_squares(x.data() + c.offset, c.n));
    const float got = device_sumsq(alloc, d_x.ptr().raw() + c.offset, int64_t(c.n));
    EXPECT_NEAR(got, want, 1e-6 * want);
    EXPECT_EQ(bits_of(device_sumsq(alloc, d_x.ptr().raw() + c.offset, int64_t(c.n))), bits_of(got))
        << "a second run gave other bits";
  }
}

TEST(CudaGlobalNorm, ClipCoefficientAndScaleHaveTheHostBits) {
  MESHTRAIN_REQUIRE_GPU();
  CudaAllocator alloc;
  const float inf = std::numeric_limits<float>::infinity();
  const float sums[] = {0.0f, 0.25f, 1.0f, 4.0f, 1234.5f, 3e30f, inf, std::numeric_limits<float>::quiet_NaN()};
  const float max_norm = 1.0f;
  for (float sumsq : sums) {
    SCOPED_TRACE("sumsq " + std::to_string(sumsq));
    auto d_sum = to_device(alloc, std::vector<float>{sumsq});
    auto d_coef = poisoned<float>(alloc, 1);
    clip_coefficient(d_coef.ptr().raw(), d_sum.ptr().raw(), max_norm, nullptr);
    const float want = clip_factor(std::sqrt(double(sumsq)), max_norm);
    EXPECT_EQ(bits_of(to_host(d_coef)[0]), bits_of(want));
  }

  const std::vector<float> x = random_floats(100003, 32);
  const float factor = 0.123f;
  std::vector<float> want(x);
  for (float& e : want) e *= factor;
  auto d_x = to_device(alloc, x);
  auto d_factor = to_device(alloc, std::vector<float>{factor});
  scale_by(d_x.ptr().raw(), d_factor.ptr().raw(), int64_t(x.size()), nullptr);
  expect_same_bits(to_host(d_x), want, "scale_by");
}

}  // namespace
}  // namespace meshtrain::kernels::cuda
