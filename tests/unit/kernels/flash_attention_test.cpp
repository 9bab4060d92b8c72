#include "meshtrain/kernels/flash_attention.hpp"

#include <cmath>
#include <ostream>

#include "kernel_test_util.hpp"
#include "meshtrain/kernels/bf16_pair_products.hpp"

namespace meshtrain::kernels {
namespace {

using namespace testing;

struct Shape {
  int64_t B, T, C, NH;
  bool causal;
};

void PrintTo(const Shape& c, std::ostream* os) {
  *os << "B" << c.B << " T" << c.T << " C" << c.C << " NH" << c.NH << (c.causal ? " causal" : " full");
}

// One forward and backward of either kernel on the same inputs.
struct Pass {
  std::vector<float> out, dqkv, lse;
  std::vector<Bf16> out16;
};

struct Inputs {
  std::vector<float> qkv, dy;
  std::vector<Bf16> qkv16, dy16;
};

Inputs inputs(const Shape& s, uint64_t seed) {
  Rng rng(seed);
  // Scores of a few units: the softmax is peaked, as in a trained model, so
  // the online maximum moves from block to block.
  Inputs in{random_vector(s.B * s.T * 3 * s.C, rng, 2.0f), random_vector(s.B * s.T * s.C, rng), {}, {}};
  in.qkv16.resize(in.qkv.size());
  in.dy16.resize(in.dy.size());
  to_bf16(in.qkv.data(), in.qkv16.data(), in.qkv.size());
  to_bf16(in.dy.data(), in.dy16.data(), in.dy.size());
  return in;
}

// The kernel that keeps the probabilities (attention.hpp), the reference.
Pass probabilities_kernel(const Shape& s, const Inputs& in, bool bf16) {
  const auto [B, T, C, NH, causal] = s;
  Pass p{std::vector<float>(B * T * C), std::vector<float>(B * T * 3 * C), {}, std::vector<Bf16>(B * T * C)};
  std::vector<float> att(B * NH * T * T), datt(B * NH * T * T);
  std::vector<Bf16> att16(bf16 ? B * NH * T * T : 0);
  AttentionBf16 ops{.qkv = in.qkv16.data(), .att = att16.data(), .out = p.out16.data(), .dout = in.dy16.data()};
  attention_forward(bf16 ? nullptr : p.out.data(), att.data(), in.qkv.data(), B, T, C, NH, causal,
                    bf16 ? &ops : nullptr);
  attention_backward(p.dqkv.data(), datt.data(), in.dy.data(), att.data(), in.qkv.data(), B, T, C, NH, causal,
                     bf16 ? &ops : nullptr);
  if (bf16) to_float(p.out16.data(), p.out.data(), p.out.size());
  return p;
}

Pass flash_kernel(const Shape& s, const Inputs& in, bool bf16) {
  const auto [B, T, C, NH, causal] = s;
  Pass p{std::vector<float>(B * T * C), std::vector<float>(B * T * 3 * C, NAN), std::vector<float>(B * NH * T),
         std::vector<Bf16>(B * T * C)};
  AttentionBf16 ops{.qkv = in.qkv16.data(), .out = p.out16.data(), .dout = in.dy16.data()};
  // Under bf16 the fp32 q, k, v, output and its gradient are not given: the kernel must not need them.
  flash_attention_forward(bf16 ? nullptr : p.out.data(), p.lse.data(), bf16 ? nullptr : in.qkv.data(), B, T, C, NH,
                          causal, bf16 ? &ops : nullptr);
  flash_attention_backward(p.dqkv.data(), bf16 ? nullptr : in.dy.data(), bf16 ? nullptr : p.out.data(),
                           p.lse.data(), bf16 ? nullptr : in.qkv.data(), B, T, C, NH, causal, bf16 ? &ops : nullptr);
  if (bf16) to_float(p.out16.data(), p.out.data(), p.out.size());
  return p;
}

double relative(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0, n = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    d += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    n += double(b[i]) * b[i];
  }
  return n > 0 ? std::sqrt(d / n) : std::sqrt(d);
}

class FlashAttention : public ::testing::TestWithParam<Shape> {};

// fp32: the same numbers as the kernel that keeps the probabilities, to
// float rounding (the sums run in another order), elementwise.
TEST_P(FlashAttention, Fp32MatchesTheProbabilitiesKernel) {
  const Shape s = GetParam();
  const Inputs in = inputs(s, uint64_t(s.B * 1000 + s.T * 10 + s.C + s.causal));
  const Pass ref = probabilities_kernel(s, in, false), flash = flash_kernel(s, in, false);
  expect_close(flash.out, to_double(ref.out), 2e-6, 2e-5, "out");
  expect_close(flash.dqkv, to_double(ref.dqkv), 1e-5, 1e-4, "dqkv");
  // The log-sum-exp is the softmax's normalizer: exp(lse) = sum_j exp(s_j).
  const auto [B, T, C, NH, causal] = s;
  const int64_t hs = C / NH, t = T - 1;
  double sum = 0;
  for (int64_t j = 0; j <= t; ++j) {
    double d = 0;
    for (int64_t i = 0; i < hs; ++i) d += double(in.qkv[t * 3 * C + i]) * in.qkv[j * 3 * C + C + i];
    sum += std::exp(d / std::sqrt(double(hs)));
  }
  EXPECT_NEAR(flash.lse[t], std::log(sum), 1e-4) << "lse of the last row of head 0";
}

// bf16 products: within bf16's rounding of the bf16 kernel that keeps the
// (rounded) probabilities, norm-relative.
TEST_P(FlashAttention, Bf16StaysWithinBf16RoundingOfTheProbabilitiesKernel) {
  const Shape s = GetParam();
  const Inputs in = inputs(s, uint64_t(s.B * 1000 + s.T * 10 + s.C + s.causal + 3));
  const Pass ref = probabilities_kernel(s, in, true), flash = flash_kernel(s, in, true);
  EXPECT_LT(relative(flash.out, ref.out), 1e-2);
  EXPECT_LT(relative(flash.dqkv, ref.dqkv), 2e-2);
  const Pass f32 = probabilities_kernel(s, in, false);
  EXPECT_LT(relative(flash.dqkv, f32.dqkv), 2e-2) << "and of fp32";
}

// Deterministic: a second run gives the same bits.
TEST_P(FlashAttention, RepeatsItsBits) {
  const Shape s = GetParam();
  const Inputs in = inputs(s, 11);
  for (bool bf16 : {false, true}) {
    const Pass a = flash_kernel(s, in, bf16), b = flash_kernel(s, in, bf16);
    ASSERT_EQ(0, std::memcmp(a.dqkv.data(), b.dqkv.data(), a.dqkv.size() * sizeof(float))) << "bf16 " << bf16;
    ASSERT_EQ(0, std::memcmp(a.out.data(), b.out.data(), a.out.size() * sizeof(float))) << "bf16 " << bf16;
  }
}

// Where the CPU has AVX512-BF16 and T and the head size are multiples of
// 16, bf16 flash attention runs its products on operands packed per head
// (flash_attention_packed.hpp): against the oneDNN path on the same inputs,
// norm-relative within the last bf16 bit of the rounded probabilities.
TEST_P(FlashAttention, PackedProductsMatchTheOneDnnPath) {
  const Shape s = GetParam();
  if (s.T % 16 != 0 || (s.C / s.NH) % 16 != 0) GTEST_SKIP() << "shape runs the oneDNN path only";
  if (!pair_products::available()) GTEST_SKIP() << "this CPU has no AVX512-BF16";
  const Inputs in = inputs(s, 17);
  const Pass packed = flash_kernel(s, in, true);
  detail::allow_packed_attention_products(false);
  const Pass onednn = flash_kernel(s, in, true);
  detail::allow_packed_attention_products(true);
  EXPECT_LT(relative(packed.out, onednn.out), 2e-3) << "output";
  EXPECT_LT(relative(packed.dqkv, onednn.dqkv), 3e-3) << "dqkv";
  expect_close(packed.lse, to_double(onednn.lse), 1e-4, 1e-5, "lse");
}

// T not a multiple of the blocks (forward 64 rows x 256 keys, backward 64 x
// 64), causal and full, one and several heads; T = 300 and 320 cross a key
// block in forward, 1 is a single row.
INSTANTIATE_TEST_SUITE_P(Shapes, FlashAttention,
                         ::testing::Values(Shape{1, 1, 4, 1, true}, Shape{2, 5, 8, 2, true}, Shape{2, 7, 12, 3, false},
                                           Shape{1, 64, 16, 1, true}, Shape{1, 100, 16, 2, true},
                                           Shape{1, 100, 16, 2, false}, Shape{1, 300, 16, 1, true},
                                           Shape{1, 300, 32, 2, false}, Shape{2, 129, 32, 2, true},
                                           // multiples of 16: the packed bf16 products where the CPU has them
                                           Shape{1, 320, 32, 1, true}, Shape{2, 128, 64, 2, false},
                                           Shape{1, 48, 32, 2, true}));

}  // namespace
}  // namespace meshtrain::kernels
