// The CUDA GELU (kernels/cuda/gelu.hpp) against the CPU's
// (kernels/elementwise.hpp): the same formulas built without FMA
// contraction on both sides, so every result has the same bits; a NaN
// result only has to be a NaN (its payload is the hardware's).
#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "gpu_test_util.hpp"
#include "kernel_compare.hpp"
#include "meshtrain/kernels/cuda/gelu.hpp"
#include "meshtrain/kernels/elementwise.hpp"

namespace meshtrain::kernels::cuda {
namespace {

using test::expect_same_bits;
using test::poisoned;
using test::random_floats;
using test::to_device;
using test::to_host;

// Random values over GELU's interesting range, plus the edges: zeros, the
// slope's clamp at +-10, huge values, infinities, subnormals. An odd count,
// so the packed path has a tail.
std::vector<float> gelu_inputs() {
  std::vector<float> x = random_floats(100003, 7, -12.0f, 12.0f);
  const float inf = std::numeric_limits<float>::infinity();
  const float specials[] = {0.0f, -0.0f, 10.0f, -10.0f, 10.5f, -10.5f, 1e13f, -1e13f, 3e38f, -3e38f,
                            inf,  -inf,  1e-40f, -1e-40f, 1e-3f, -1e-3f, 88.0f, -88.0f};
  for (size_t i = 0; i < std::size(specials); ++i) x[i * 97] = specials[i];
  return x;
}

TEST(CudaGelu, ForwardAndBackwardHaveTheCpuBits) {
  MESHTRAIN_REQUIRE_GPU();
  CudaAllocator alloc;
  const std::vector<float> x = gelu_inputs();
  const std::vector<float> dy = random_floats(x.size(), 8, -2.0f, 2.0f);
  const int64_t n = int64_t(x.size());
  std::vector<float> out_cpu(x.size()), dx_cpu(x.size());
  kernels::gelu_forward(out_cpu.data(), x.data(), n);
  kernels::gelu_backward(dx_cpu.data(), x.data(), dy.data(), n);

  auto d_x = to_device(alloc, x);
  auto d_dy = to_device(alloc, dy);
  auto d_out = poisoned<float>(alloc, x.size());
  auto d_dx = poisoned<float>(alloc, x.size());
  gelu_forward(d_out.ptr().raw(), d_x.ptr().raw(), n, nullptr);
  gelu_backward(d_dx.ptr().raw(), d_x.ptr().raw(), d_dy.ptr().raw(), n, nullptr);
  expect_same_bits(to_host(d_out), out_cpu, "gelu_forward", /*nan_any=*/true);
  expect_same_bits(to_host(d_dx), dx_cpu, "gelu_backward", /*nan_any=*/true);

  // Unaligned (element by element) and in place: dinp over dout.
  auto d_dy2 = to_device(alloc, dy);
  gelu_backward(d_dy2.ptr().raw() + 1, d_x.ptr().raw() + 1, d_dy2.ptr().raw() + 1, n - 1, nullptr);
  std::vector<float> dx_inplace = to_host(d_dy2);
  std::vector<float> want(dx_cpu);
  want[0] = dy[0];  // untouched
  expect_same_bits(dx_inplace, want, "gelu_backward unaligned, in place", /*nan_any=*/true);
}

// Every bf16 value as input (NaNs and infinities included), against the
// CPU's tables, which hold the bits of the same formulas.
TEST(CudaGelu, Bf16HasTheCpuBitsForEveryInput) {
  MESHTRAIN_REQUIRE_GPU();
  CudaAllocator alloc;
  const int64_t n = 1 << 16;
  std::vector<Bf16> x(n), dy(n);
  const std::vector<float> dy32 = random_floats(n, 9, -3.0f, 3.0f);
  for (int64_t i = 0; i < n; ++i) {
    x[i] = Bf16{uint16_t(i)};
    dy[i] = to_bf16(dy32[i]);
  }
  std::vector<Bf16> out_cpu(n), dx_cpu(n);
  kernels::gelu_forward_bf16(out_cpu.data(), x.data(), n);
  kernels::gelu_backward_rounded(dx_cpu.data(), nullptr, x.data(), dy.data(), 1, n);

  auto d_x = to_device(alloc, x);
  auto d_dy = to_device(alloc, dy);
  auto d_out = poisoned<Bf16>(alloc, n);
  auto d_dx = poisoned<Bf16>(alloc, n);
  gelu_forward_bf16(d_out.ptr().raw(), d_x.ptr().raw(), n, nullptr);
  gelu_backward_bf16(d_dx.ptr().raw(), d_x.ptr().raw(), d_dy.ptr().raw(), n, nullptr);
  expect_same_bits(to_host(d_out), out_cpu, "gelu_forward_bf16", /*nan_any=*/true);
  expect_same_bits(to_host(d_dx), dx_cpu, "gelu_backward_bf16", /*nan_any=*/true);
}

}  // namespace
}  // namespace meshtrain::kernels::cuda
