// The CUDA layer norm (kernels/cuda/layernorm.hpp) against the CPU's
// (kernels/layernorm.hpp) on B = 3, T = 37 rows of C = 96 (packs of 4) and
// C = 99 (element by element). Row sums are a warp's on the GPU, SIMD lanes
// on the CPU: outputs agree within 1e-5 relative (kernel_compare.hpp), not
// bit for bit. Exact where the arithmetic is the same: the fused residual
// is a + b; a bf16 output is the rounding of the kernel's own fp32 output.
// The backward runs twice and must repeat its bits.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "gpu_test_util.hpp"
#include "kernel_compare.hpp"
#include "meshtrain/kernels/cuda/layernorm.hpp"
#include "meshtrain/kernels/elementwise.hpp"
#include "meshtrain/kernels/layernorm.hpp"

namespace meshtrain::kernels::cuda {
namespace {

using test::bits_of;
using test::expect_close;
using test::expect_same_bits;
using test::poisoned;
using test::random_floats;
using test::to_device;
using test::to_host;

constexpr int64_t N = 3 * 37;
constexpr double kRel = 1e-5;

class CudaLayerNorm : public ::testing::TestWithParam<int64_t> {};

// bf16 outputs of the GPU's fp32 row statistics against the CPU's: equal,
// or neighbours where the fp32 values straddle a rounding boundary.
void expect_bf16_within_one_step(const std::vector<Bf16>& got, const std::vector<Bf16>& want, const char* what) {
  size_t bad = 0, neighbours = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const int d = int(got[i].bits) - int(want[i].bits);
    if (d == 0) continue;
    if ((d == 1 || d == -1) && (got[i].bits & 0x8000) == (want[i].bits & 0x8000)) {
      ++neighbours;
      continue;
    }
    if (++bad <= 5) ADD_FAILURE() << what << "[" << i << "]: 0x" << std::hex << got[i].bits << ", CPU 0x" << want[i].bits;
  }
  EXPECT_EQ(bad, 0u) << what;
  std::printf("  %s: %zu of %zu one bf16 step from the CPU's\n", what, neighbours, got.size());
}

std::vector<Bf16> rounded(const std::vector<float>& x) {
  std::vector<Bf16> r(x.size());
  for (size_t i = 0; i < x.size(); ++i) r[i] = to_bf16(x[i]);
  return r;
}

TEST_P(CudaLayerNorm, ForwardMatchesTheCpu) {
  MESHTRAIN_REQUIRE_GPU();
  CudaAllocator alloc;
  const int64_t C = GetParam();
  // An offset mean, so the statistics are not all near zero.
  const std::vector<float> x = random_floats(N * C, 41, -1.0f, 3.0f);
  const std::vector<float> w = random_floats(C, 42, 0.5f, 1.5f), b = random_floats(C, 43);
  std::vector<float> out(N * C), mean(N), rstd(N);
  std::vector<Bf16> out16(N * C);
  kernels::layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
  kernels::layernorm_forward_rounded(out16.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);

  auto d_x = to_device(alloc, x), d_w = to_device(alloc, w), d_b = to_device(alloc, b);
  auto d_out = poisoned<float>(alloc, out.size());
  auto d_out16 = poisoned<Bf16>(alloc, out.size());
  auto d_mean = poisoned<float>(alloc, N), d_rstd = poisoned<float>(alloc, N);
  layernorm_forward(d_out.ptr().raw(), d_mean.ptr().raw(), d_rstd.ptr().raw(), d_x.ptr().raw(), d_w.ptr().raw(),
                    d_b.ptr().raw(), N, C, nullptr);
  const std::vector<float> got = to_host(d_out);
  expect_close(got, out, kRel, "out");
  expect_close(to_host(d_mean), mean, kRel, "mean");
  expect_close(to_host(d_rstd), rstd, kRel, "rstd");

  auto d_mean2 = poisoned<float>(alloc, N), d_rstd2 = poisoned<float>(alloc, N);
  layernorm_forward_rounded(d_out16.ptr().raw(), d_mean2.ptr().raw(), d_rstd2.ptr().raw(), d_x.ptr().raw(),
                            d_w.ptr().raw(), d_b.ptr().raw(), N, C, nullptr);
  const std::vector<Bf16> got16 = to_host(d_out16);
  expect_same_bits(got16, rounded(got), "out16 = bf16(the fp32 kernel's out)");
  expect_same_bits(to_host(d_mean2), to_host(d_mean), "mean of the bf16 variant");
  expect_same_bits(to_host(d_rstd2), to_host(d_rstd), "rstd of the bf16 variant");
  expect_bf16_within_one_step(got16, out16, "out16");
}

TEST_P(CudaLayerNorm, FusedResidualForwardMatchesTheCpu) {
  MESHTRAIN_REQUIRE_GPU();
  CudaAllocator alloc;
  const int64_t C = GetParam();
  const std::vector<float> a = random_floats(N * C, 51, -1.0f, 3.0f), bb = random_floats(N * C, 52);
  const std::vector<float> w = random_floats(C, 53, 0.5f, 1.5f), b = random_floats(C, 54);
  std::vector<float> resid(N * C), out(N * C), mean(N), rstd(N);
  kernels::residual_forward(resid.data(), a.data(), bb.data(), N * C);
  kernels::layernorm_forward(out.data(), mean.data(), rstd.data(), resid.data(), w.data(), b.data(), N, C);

  auto d_a = to_device(alloc, a), d_bb = to_device(alloc, bb), d_w = to_device(alloc, w), d_b = to_device(alloc, b);
  auto d_resid = poisoned<float>(alloc, resid.size());
  auto d_out = poisoned<float>(alloc, out.size());
  auto d_mean = poisoned<float>(alloc, N), d_rstd = poisoned<float>(alloc, N);
  residual_layernorm_forward(d_resid.ptr().raw(), d_out.ptr().raw(), d_mean.ptr().raw(), d_rstd.ptr().raw(),
                             d_a.ptr().raw(), d_bb.ptr().raw(), d_w.ptr().raw(), d_b.ptr().raw(), N, C, nullptr);
  expect_same_bits(to_host(d_resid), resid, "residual");
  const std::vector<float> got = to_host(d_out);
  expect_close(got, out, kRel, "out");
  expect_close(to_host(d_mean), mean, kRel, "mean");
  expect_close(to_host(d_rstd), rstd, kRel, "rstd");

  // bf16 output, residual written over a (in place): the same residual,
  // and the rounding of the fp32 variant's output.
  auto d_out16 = poisoned<Bf16>(alloc, out.size());
  residual_layernorm_forward_rounded(d_a.ptr().raw(), d_out16.ptr().raw(), nullptr, nullptr, d_a.ptr().raw(),
                                     d_bb.ptr().raw(), d_w.ptr().raw(), d_b.ptr().raw(), N, C, nullptr);
  expect_same_bits(to_host(d_a), resid, "residual in place");
  expect_same_bits(to_host(d_out16), rounded(got), "out16 = bf16(the fp32 kernel's out)");
}

// dresid: none, a separate array, or dinp itself (its values in place).
enum class Resid { None, Separate, InPlace };

TEST_P(CudaLayerNorm, BackwardMatchesTheCpuAndRepeats) {
  MESHTRAIN_REQUIRE_GPU();
  CudaAllocator alloc;
  const int64_t C = GetParam();
  const std::vector<float> x = random_floats(N * C, 61, -1.0f, 3.0f);
  const std::vector<float> w = random_floats(C, 62, 0.5f, 1.5f), b = random_floats(C, 63);
  const std::vector<float> dout = random_floats(N * C, 64), dresid = random_floats(N * C, 65);
  const std::vector<float> dw0 = random_floats(C, 66), db0 = random_floats(C, 67);
  std::vector<float> out(N * C), mean(N), rstd(N);
  kernels::layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);

  auto d_x = to_device(alloc, x), d_w = to_device(alloc, w), d_dout = to_device(alloc, dout);
  auto d_mean = to_device(alloc, mean), d_rstd = to_device(alloc, rstd), d_dresid = to_device(alloc, dresid);
  auto scratch = poisoned<float>(alloc, size_t(layernorm_backward_scratch_floats(N, C)));

  for (Resid mode : {Resid::None, Resid::Separate, Resid::InPlace}) {
    SCOPED_TRACE("dresid mode " + std::to_string(int(mode)));
    std::vector<float> dinp(mode == Resid::InPlace ? dresid : std::vector<float>(N * C)), dw(dw0), db(db0);
    const float* cpu_resid = mode == Resid::None ? nullptr : mode == Resid::Separate ? dresid.data() : dinp.data();
    kernels::layernorm_backward(dinp.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(), mean.data(),
                                rstd.data(), cpu_resid, N, C);

    std::vector<float> first_dinp, first_dw, first_db;
    for (int run = 0; run < 2; ++run) {
      auto d_dinp = mode == Resid::InPlace ? to_device(alloc, dresid) : poisoned<float>(alloc, dinp.size());
      auto d_dw = to_device(alloc, dw0), d_db = to_device(alloc, db0);
      const float* gpu_resid = mode == Resid::None       ? nullptr
                               : mode == Resid::Separate ? d_dresid.ptr().raw()
                                                         : d_dinp.ptr().raw();
      layernorm_backward(d_dinp.ptr().raw(), d_dw.ptr().raw(), d_db.ptr().raw(), d_dout.ptr().raw(), d_x.ptr().raw(),
                         d_w.ptr().raw(), d_mean.ptr().raw(), d_rstd.ptr().raw(), gpu_resid, N, C,
                         scratch.ptr().raw(), nullptr);
      const std::vector<float> got_dinp = to_host(d_dinp), got_dw = to_host(d_dw), got_db = to_host(d_db);
      if (run == 0) {
        expect_close(got_dinp, dinp, kRel, "dinp");
        expect_close(got_dw, dw, kRel, "dweight");
        expect_close(got_db, db, kRel, "dbias");
        first_dinp = got_dinp;
        first_dw = got_dw;
        first_db = got_db;
      } else {
        expect_same_bits(got_dinp, first_dinp, "dinp, second run");
        expect_same_bits(got_dw, first_dw, "dweight, second run");
        expect_same_bits(got_db, first_db, "dbias, second run");
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Channels, CudaLayerNorm, ::testing::Values(int64_t(96), int64_t(99)));

}  // namespace
}  // namespace meshtrain::kernels::cuda
