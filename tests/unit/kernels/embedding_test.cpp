#include "meshtrain/kernels/embedding.hpp"

#include "kernel_test_util.hpp"

namespace meshtrain::kernels {
namespace {

using namespace testing;

TEST(EncoderKernel, ForwardAndBackwardMatchReference) {
  const int64_t B = 3, T = 5, C = 37, V = 4, maxT = 7;
  Rng rng(1);
  auto wte = random_vector(V * C, rng), wpe = random_vector(maxT * C, rng), dy = random_vector(B * T * C, rng);
  std::vector<int32_t> tok(B * T);
  for (auto& t : tok) t = static_cast<int32_t>(rng.below(V));  // repeats: the backward must not race
  std::vector<float> out(B * T * C);
  encoder_forward(out.data(), tok.data(), wte.data(), wpe.data(), B, T, C);
  std::vector<double> dwte_ref(V * C, 1.0), dwpe_ref(maxT * C, 1.0);
  for (int64_t bt = 0; bt < B * T; ++bt)
    for (int64_t c = 0; c < C; ++c) {
      ASSERT_FLOAT_EQ(out[bt * C + c], wte[tok[bt] * C + c] + wpe[(bt % T) * C + c]);
      dwte_ref[tok[bt] * C + c] += dy[bt * C + c];
      dwpe_ref[(bt % T) * C + c] += dy[bt * C + c];
    }
  std::vector<float> dwte(V * C, 1.0f), dwpe(maxT * C, 1.0f);
  encoder_backward(dwte.data(), dwpe.data(), dy.data(), tok.data(), B, T, C);
  expect_close(dwte, dwte_ref, 1e-5, 1e-5, "dwte");
  expect_close(dwpe, dwpe_ref, 1e-5, 1e-5, "dwpe");
}

TEST(PositionKernel, AddAndBackward) {
  const int64_t B = 4, T = 3, C = 20;
  Rng rng(2);
  auto x = random_vector(B * T * C, rng), pos = random_vector(T * C, rng), dy = random_vector(B * T * C, rng);
  auto y = x;
  position_add_forward(y.data(), pos.data(), B, T, C);
  std::vector<double> dpos_ref(T * C, 0.0);
  for (int64_t i = 0; i < B * T * C; ++i) {
    ASSERT_FLOAT_EQ(y[i], x[i] + pos[i % (T * C)]);
    dpos_ref[i % (T * C)] += dy[i];
  }
  std::vector<float> dpos(T * C);
  position_add_backward(dpos.data(), dy.data(), B, T, C);
  expect_close(dpos, dpos_ref, 1e-5, 1e-5, "dpos");
}

TEST(PatchifyKernel, CutsPatchesInConvOrder) {
  const int64_t B = 2, ch = 2, H = 4, W = 6, P = 2;
  std::vector<float> pix(B * ch * H * W);
  for (size_t i = 0; i < pix.size(); ++i) pix[i] = static_cast<float>(i);
  const int64_t gw = W / P, np = (H / P) * gw, pd = ch * P * P;
  std::vector<float> patches(B * np * pd);
  patchify(patches.data(), pix.data(), B, ch, H, W, P);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t p = 0; p < np; ++p)
      for (int64_t k = 0; k < ch; ++k)
        for (int64_t py = 0; py < P; ++py)
          for (int64_t px = 0; px < P; ++px) {
            const int64_t y = (p / gw) * P + py, x = (p % gw) * P + px;
            ASSERT_EQ(patches[(b * np + p) * pd + (k * P + py) * P + px], pix[((b * ch + k) * H + y) * W + x]);
          }
}

TEST(MeanPoolKernel, ForwardAndBackward) {
  const int64_t B = 3, T = 4, C = 5;
  Rng rng(4);
  auto x = random_vector(B * T * C, rng), dy = random_vector(B * C, rng);
  std::vector<float> y(B * C), dx(B * T * C);
  meanpool_forward(y.data(), x.data(), B, T, C);
  meanpool_backward(dx.data(), dy.data(), B, T, C);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < C; ++c) {
      double s = 0;
      for (int64_t t = 0; t < T; ++t) {
        s += x[(b * T + t) * C + c];
        ASSERT_FLOAT_EQ(dx[(b * T + t) * C + c], dy[b * C + c] / T);
      }
      ASSERT_NEAR(y[b * C + c], s / T, 1e-6);
    }
}

}  // namespace
}  // namespace meshtrain::kernels
