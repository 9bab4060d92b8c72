#include "meshtrain/kernels/attention.hpp"

#include <ostream>

#include "kernel_test_util.hpp"
#include "meshtrain/kernels/bf16_pair_products.hpp"

namespace meshtrain::kernels {
namespace {

using namespace testing;

// Naive attention in double: qkv (B, T, 3C) -> out (B, T, C).
std::vector<double> attention_ref(const std::vector<double>& qkv, int64_t B, int64_t T, int64_t C, int64_t NH,
                                  bool causal) {
  const int64_t hs = C / NH;
  std::vector<double> out(B * T * C, 0.0), p(T);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < NH; ++h)
      for (int64_t t = 0; t < T; ++t) {
        const double* q = &qkv[(b * T + t) * 3 * C + h * hs];
        const int64_t n = causal ? t + 1 : T;
        double mx = -1e300, sum = 0;
        for (int64_t j = 0; j < n; ++j) {
          const double* k = &qkv[(b * T + j) * 3 * C + C + h * hs];
          double s = 0;
          for (int64_t i = 0; i < hs; ++i) s += q[i] * k[i];
          p[j] = s / std::sqrt(static_cast<double>(hs));
          mx = std::max(mx, p[j]);
        }
        for (int64_t j = 0; j < n; ++j) sum += (p[j] = std::exp(p[j] - mx));
        for (int64_t j = 0; j < n; ++j) {
          const double* v = &qkv[(b * T + j) * 3 * C + 2 * C + h * hs];
          for (int64_t i = 0; i < hs; ++i) out[(b * T + t) * C + h * hs + i] += p[j] / sum * v[i];
        }
      }
  return out;
}

struct Case {
  int64_t B, T, C, NH;
  bool causal;
};

// Names the case in test names ("B2 T80 C32 NH1 causal"): gtest otherwise
// prints its bytes, padding included, so the names would change from build
// to build.
void PrintTo(const Case& c, std::ostream* os) {
  *os << "B" << c.B << " T" << c.T << " C" << c.C << " NH" << c.NH << (c.causal ? " causal" : " full");
}

class AttentionKernel : public ::testing::TestWithParam<Case> {};

TEST_P(AttentionKernel, ForwardAndBackwardMatchReference) {
  const auto [B, T, C, NH, causal] = GetParam();
  Rng rng(B * 1000 + T * 10 + C + causal);
  auto qkv = random_vector(B * T * 3 * C, rng), dy = random_vector(B * T * C, rng);
  std::vector<float> out(B * T * C), att(B * NH * T * T), datt(B * NH * T * T), dqkv(B * T * 3 * C);
  attention_forward(out.data(), att.data(), qkv.data(), B, T, C, NH, causal);
  expect_close(out, attention_ref(to_double(qkv), B, T, C, NH, causal), 1e-5, 1e-4, "out");
  if (causal) {
    for (int64_t bh = 0; bh < B * NH; ++bh)
      for (int64_t t = 0; t < T; ++t)
        for (int64_t j = t + 1; j < T; ++j) ASSERT_EQ(att[(bh * T + t) * T + j], 0.0f);
  }
  attention_backward(dqkv.data(), datt.data(), dy.data(), att.data(), qkv.data(), B, T, C, NH, causal);
  auto f = [&](const std::vector<double>& v) { return dot(attention_ref(v, B, T, C, NH, causal), dy); };
  if (qkv.size() <= 600) {
    expect_close(dqkv, numeric_grad(f, to_double(qkv)), 1e-4, 1e-3, "dqkv");
    return;
  }
  // Long sequences (several causal row blocks of 64): every q, k, v element
  // of the rows at and around block edges, where an off-by-one would show.
  auto x = to_double(qkv);
  std::vector<size_t> picks;
  for (int64_t t : {0, 1, 62, 63, 64, 65, 127, 128, 129, static_cast<int>(T) - 1})
    if (t < T)
      for (int64_t e = 0; e < 3 * C; ++e) picks.push_back(((B - 1) * T + t) * 3 * C + e);
  for (size_t i : picks) {
    const double keep = x[i], eps = 1e-4;
    x[i] = keep + eps;
    const double up = f(x);
    x[i] = keep - eps;
    const double down = f(x);
    x[i] = keep;
    const double g = (up - down) / (2 * eps);
    ASSERT_NEAR(dqkv[i], g, 1e-4 + 1e-3 * std::fabs(g)) << "dqkv at " << i;
  }
}

// bf16 products against the fp32 kernel on the same inputs: the outputs and
// every input gradient within bf16's rounding (norm-relative 1e-2: each
// product's operands carry 2^-9 relative error), and not equal to fp32's.
TEST_P(AttentionKernel, Bf16ProductsStayWithinBf16RoundingOfFp32) {
  const auto [B, T, C, NH, causal] = GetParam();
  Rng rng(B * 1000 + T * 10 + C + causal + 7);
  auto qkv = random_vector(B * T * 3 * C, rng), dy = random_vector(B * T * C, rng);
  std::vector<Bf16> qkv16(qkv.size()), dy16(dy.size());
  to_bf16(qkv.data(), qkv16.data(), qkv.size());
  to_bf16(dy.data(), dy16.data(), dy.size());
  struct Pass {
    std::vector<float> out, att, datt, dqkv;
    std::vector<Bf16> att16;
  };
  auto run = [&](bool bf16) {
    Pass p{std::vector<float>(B * T * C), std::vector<float>(bf16 ? 0 : B * NH * T * T),
           std::vector<float>(B * NH * T * T), std::vector<float>(B * T * 3 * C),
           std::vector<Bf16>(bf16 ? B * NH * T * T : 0)};
    const AttentionBf16 operands{.qkv = qkv16.data(), .att = p.att16.data(), .dout = dy16.data()};
    attention_forward(p.out.data(), p.att.data(), qkv.data(), B, T, C, NH, causal, bf16 ? &operands : nullptr);
    attention_backward(p.dqkv.data(), p.datt.data(), dy.data(), p.att.data(), qkv.data(), B, T, C, NH, causal,
                       bf16 ? &operands : nullptr);
    return p;
  };
  const Pass f32 = run(false), b16 = run(true);
  // The scores differ a little (bf16 q and k move each by about 1%), so the
  // stored probabilities are near fp32's, not its rounding: within 5%.
  for (size_t i = 0; i < f32.att.size(); ++i)
    ASSERT_NEAR(to_float(b16.att16[i]), f32.att[i], 5e-2 * f32.att[i] + 1e-6) << "probability " << i;
  auto relative = [](const std::vector<float>& a, const std::vector<float>& b) {
    double d = 0, n = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      d += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
      n += double(b[i]) * b[i];
    }
    return n > 0 ? std::sqrt(d / n) : std::sqrt(d);
  };
  const double out_err = relative(b16.out, f32.out), grad_err = relative(b16.dqkv, f32.dqkv);
  EXPECT_LT(out_err, 1e-2);
  EXPECT_LT(grad_err, 1e-2);
  if (T * C >= 64) {
    EXPECT_GT(out_err + grad_err, 0.0) << "bf16 should round differently from fp32";
  }
}

// Under bf16 the output may be written rounded instead (c_proj's input),
// and the fp32 q, k, v, output and dout left out: the same probabilities and
// gradients, and the output is the fp32 one rounded, bit for bit.
TEST_P(AttentionKernel, Bf16OutputAndNoFp32OperandsGiveTheSameBits) {
  const auto [B, T, C, NH, causal] = GetParam();
  Rng rng(B * 100 + T + C + 3);
  auto qkv = random_vector(B * T * 3 * C, rng), dy = random_vector(B * T * C, rng);
  std::vector<Bf16> qkv16(qkv.size()), dy16(dy.size()), att_a(B * NH * T * T), att_b(att_a.size()), out16(dy.size());
  to_bf16(qkv.data(), qkv16.data(), qkv.size());
  to_bf16(dy.data(), dy16.data(), dy.size());
  std::vector<float> out(dy.size()), datt(att_a.size()), dqkv_a(qkv.size()), dqkv_b(qkv.size());
  const AttentionBf16 a{.qkv = qkv16.data(), .att = att_a.data(), .dout = dy16.data()};
  const AttentionBf16 b{.qkv = qkv16.data(), .att = att_b.data(), .out = out16.data(), .dout = dy16.data()};
  attention_forward(out.data(), nullptr, qkv.data(), B, T, C, NH, causal, &a);
  attention_forward(nullptr, nullptr, nullptr, B, T, C, NH, causal, &b);
  for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out16[i].bits, to_bf16(out[i]).bits) << "output " << i;
  for (size_t i = 0; i < att_a.size(); ++i) ASSERT_EQ(att_a[i].bits, att_b[i].bits) << "probability " << i;
  attention_backward(dqkv_a.data(), datt.data(), dy.data(), nullptr, qkv.data(), B, T, C, NH, causal, &a);
  // Nor the fp32 score-gradient scratch: under bf16 it lives in a row block.
  attention_backward(dqkv_b.data(), nullptr, nullptr, nullptr, nullptr, B, T, C, NH, causal, &b);
  expect_close(dqkv_b, dqkv_a, 0, 0, "dqkv without the fp32 operands");
}

// Where the CPU and shapes allow (T and the head size multiples of 16),
// bf16 attention runs its products on operands packed once per head
// (bf16_pair_products.hpp) instead of through oneDNN, and its softmax row
// passes in AVX-512 (attention_softmax.hpp): the same arithmetic up to
// float rounding. The probabilities and the rounded output may then differ
// in a last bf16 bit, and the gradients by as much.
TEST_P(AttentionKernel, PackedProductsMatchTheOneDnnPath) {
  const auto [B, T, C, NH, causal] = GetParam();
  if (T % 16 != 0 || (C / NH) % 16 != 0) GTEST_SKIP() << "shape runs the oneDNN path only";
  if (!pair_products::available()) GTEST_SKIP() << "this CPU has no AVX512-BF16";
  Rng rng(B * 31 + T * 7 + C + causal);
  auto qkv = random_vector(B * T * 3 * C, rng), dy = random_vector(B * T * C, rng);
  std::vector<Bf16> qkv16(qkv.size()), dy16(dy.size());
  to_bf16(qkv.data(), qkv16.data(), qkv.size());
  to_bf16(dy.data(), dy16.data(), dy.size());
  struct Pass {
    std::vector<Bf16> att16, out16;
    std::vector<float> dqkv;
  };
  auto run = [&](bool packed) {
    detail::allow_packed_attention_products(packed);
    Pass p{std::vector<Bf16>(B * NH * T * T), std::vector<Bf16>(dy.size()), std::vector<float>(qkv.size())};
    const AttentionBf16 operands{.qkv = qkv16.data(), .att = p.att16.data(), .out = p.out16.data(),
                                 .dout = dy16.data()};
    attention_forward(nullptr, nullptr, nullptr, B, T, C, NH, causal, &operands);
    attention_backward(p.dqkv.data(), nullptr, nullptr, nullptr, nullptr, B, T, C, NH, causal, &operands);
    detail::allow_packed_attention_products(true);
    return p;
  };
  const Pass packed = run(true), onednn = run(false);
  // One bf16 ulp (2^-8 to 2^-7 relative) at most, and only where the fp32
  // results round differently: most probabilities agree to the bit.
  size_t same = 0;
  for (size_t i = 0; i < packed.att16.size(); ++i) {
    const float a = to_float(packed.att16[i]), b = to_float(onednn.att16[i]);
    ASSERT_NEAR(a, b, 0x1p-7 * std::fabs(b) + 1e-30) << "probability " << i;
    same += packed.att16[i].bits == onednn.att16[i].bits;
  }
  EXPECT_GT(same, packed.att16.size() * 9 / 10);
  // The output and gradients, norm-relative: each element's bf16 operands
  // are the same or a last bit apart.
  auto relative = [](auto a, auto b) {
    double d = 0, n = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      d += (double(a[i]) - double(b[i])) * (double(a[i]) - double(b[i]));
      n += double(b[i]) * double(b[i]);
    }
    return std::sqrt(d / n);
  };
  std::vector<float> out_packed(packed.out16.size()), out_onednn(packed.out16.size());
  to_float(packed.out16.data(), out_packed.data(), out_packed.size());
  to_float(onednn.out16.data(), out_onednn.data(), out_onednn.size());
  EXPECT_LT(relative(out_packed, out_onednn), 2e-3) << "output";
  EXPECT_LT(relative(packed.dqkv, onednn.dqkv), 2e-3) << "dqkv";
}

INSTANTIATE_TEST_SUITE_P(Shapes, AttentionKernel,
                         ::testing::Values(Case{1, 1, 4, 1, true}, Case{2, 5, 8, 2, true}, Case{2, 7, 12, 3, true},
                                           Case{2, 5, 8, 2, false}, Case{3, 6, 6, 3, false},
                                           Case{1, 150, 8, 2, true}, Case{2, 64, 8, 1, true},
                                           Case{1, 129, 8, 2, false},
                                           // head sizes 16 and 32: packed bf16 products where the CPU has them
                                           Case{1, 128, 32, 2, true}, Case{1, 80, 32, 1, true},
                                           Case{1, 32, 32, 1, false}));

}  // namespace
}  // namespace meshtrain::kernels
