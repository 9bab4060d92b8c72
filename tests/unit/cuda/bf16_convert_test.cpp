// The CUDA fp32 <-> bf16 array conversions (kernels/cuda/bf16_convert.hpp)
// against the CPU's (kernels/bf16.hpp): integer arithmetic on the bits, so
// every element matches bit for bit, NaNs included.
#include <gtest/gtest.h>

#include <bit>
#include <limits>
#include <vector>

#include "gpu_test_util.hpp"
#include "kernel_compare.hpp"
#include "meshtrain/kernels/bf16.hpp"
#include "meshtrain/kernels/cuda/bf16_convert.hpp"

namespace meshtrain::kernels::cuda {
namespace {

using test::expect_same_bits;
using test::poisoned;
using test::random_floats;
using test::to_device;
using test::to_host;

TEST(CudaBf16Convert, RoundingHasTheCpuBits) {
  MESHTRAIN_REQUIRE_GPU();
  CudaAllocator alloc;
  // Random magnitudes, exact ties (low 16 bits 0x8000, odd and even kept
  // parts), NaNs with payloads, infinities, subnormals, the largest floats.
  std::vector<float> x = random_floats(70001, 11, -3.0f, 3.0f);
  const uint32_t special_bits[] = {0x3f808000u, 0x3f818000u, 0xbf808000u, 0x7f7fffffu, 0xff7fffffu,
                                   0x7f800000u, 0xff800000u, 0x7fc00001u, 0xffa00000u, 0x7f800001u,
                                   0x00000001u, 0x80008000u, 0x00018000u, 0x0u,        0x80000000u};
  for (size_t i = 0; i < std::size(special_bits); ++i) x[i * 131] = std::bit_cast<float>(special_bits[i]);
  for (size_t i = 0; i < 1000; ++i) x[20000 + i] = std::bit_cast<float>(uint32_t(0x3f800000u + i * 0x8000u));
  const int64_t n = int64_t(x.size());
  std::vector<Bf16> want(x.size());
  kernels::to_bf16(x.data(), want.data(), x.size());

  auto d_x = to_device(alloc, x);
  auto d_out = poisoned<Bf16>(alloc, x.size());
  to_bf16(d_x.ptr().raw(), d_out.ptr().raw(), n, nullptr);
  expect_same_bits(to_host(d_out), want, "to_bf16");

  // Element by element (unaligned): the same bits.
  auto d_out2 = poisoned<Bf16>(alloc, x.size());
  to_bf16(d_x.ptr().raw() + 1, d_out2.ptr().raw() + 1, n - 1, nullptr);
  std::vector<Bf16> got2 = to_host(d_out2);
  got2[0] = want[0];  // not written (poison)
  expect_same_bits(got2, want, "to_bf16 unaligned");
}

TEST(CudaBf16Convert, WideningEveryValueHasTheCpuBits) {
  MESHTRAIN_REQUIRE_GPU();
  CudaAllocator alloc;
  const int64_t n = (1 << 16) + 3;  // every bf16, then a tail
  std::vector<Bf16> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = Bf16{uint16_t(i)};
  std::vector<float> want(n);
  kernels::to_float(x.data(), want.data(), size_t(n));

  auto d_x = to_device(alloc, x);
  auto d_out = poisoned<float>(alloc, size_t(n));
  to_float(d_x.ptr().raw(), d_out.ptr().raw(), n, nullptr);
  expect_same_bits(to_host(d_out), want, "to_float");
}

TEST(CudaBf16Convert, WideningDividedHasTheCpuBits) {
  // Data parallelism's bf16 wire: the sum of 3 ranks' gradients, averaged.
  MESHTRAIN_REQUIRE_GPU();
  CudaAllocator alloc;
  const int64_t n = (1 << 16) + 3;
  std::vector<Bf16> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = Bf16{uint16_t(i)};
  std::vector<float> want(n);
  kernels::widen_divided(x.data(), want.data(), size_t(n), 3.0f);

  auto d_x = to_device(alloc, x);
  auto d_out = poisoned<float>(alloc, size_t(n));
  widen_divided(d_x.ptr().raw(), d_out.ptr().raw(), n, 3.0f, nullptr);
  expect_same_bits(to_host(d_out), want, "widen_divided");
}

}  // namespace
}  // namespace meshtrain::kernels::cuda
