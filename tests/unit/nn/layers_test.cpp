#include <gtest/gtest.h>

#include <cstring>

#include "grad_check.hpp"
#include "meshtrain/core/error.hpp"
#include "meshtrain/nn/attention.hpp"
#include "meshtrain/nn/block.hpp"
#include "meshtrain/nn/cross_entropy.hpp"
#include "meshtrain/nn/embedding.hpp"
#include "meshtrain/nn/layernorm.hpp"
#include "meshtrain/nn/linear.hpp"
#include "meshtrain/nn/mlp.hpp"

namespace meshtrain::nn {
namespace {

using namespace testing;

TEST(Linear, BackwardMatchesFiniteDifferences) {
  const int64_t M = 5, in = 7, out = 9;
  ParamStore store;
  Linear lin(store, "fc", in, out);
  store.allocate();
  Rng rng(1);
  randomize(store, rng, 0.5f);
  auto x = random_vector(M * in, rng), res = random_vector(M * out, rng), w = random_vector(M * out, rng);
  auto loss = [&] { return dot(lin.forward(x.data(), M, res.data()), w); };
  const float* y = lin.forward(x.data(), M, res.data());
  EXPECT_NEAR(y[0] - res[0], [&] {
    double s = store.param(1)[0];
    for (int64_t k = 0; k < in; ++k) s += x[k] * store.param(0)[k * out];
    return s;
  }(), 1e-5);
  std::vector<float> dx(M * in);
  lin.backward(dx.data(), w.data());
  expect_grad_matches(x.data(), dx.data(), x.size(), loss, "dinp", rng, 40);
  expect_param_grads_match(store, loss, rng, 40);
  // Parameter gradients accumulate: a second backward doubles them.
  const float g0 = store.grad(0)[3];
  lin.backward(nullptr, w.data());
  EXPECT_NEAR(store.grad(0)[3], 2 * g0, 1e-5 + 1e-6 * std::fabs(g0));
}

// After zero_grads() the first backward writes the weight gradient (the
// store's claim_zeroed_grad) instead of adding it onto zeros: the same bits,
// and later backwards still add, in both precisions.
TEST(Linear, FirstBackwardAfterZeroGradsWritesLaterOnesAdd) {
  for (Precision precision : {Precision::Fp32, Precision::Bf16}) {
    const int64_t M = 6, in = 8, out = 5;
    ParamStore store;
    Linear lin(store, "fc", in, out);
    store.allocate();
    store.set_compute_precision(precision);
    Rng rng(3);
    randomize(store, rng, 0.5f);
    auto x = random_vector(M * in, rng), dy = random_vector(M * out, rng);
    lin.forward(x.data(), M);
    lin.backward(nullptr, dy.data());  // allocate() zeroed but claimed nothing: added onto zeros
    const std::vector<float> added(store.grad(0), store.grad(0) + in * out);
    lin.backward(nullptr, dy.data());  // now 2x: not zeroed since
    EXPECT_NEAR(store.grad(0)[7], 2 * added[7], 1e-6 + 1e-6 * std::fabs(added[7]));
    store.zero_grads();
    lin.backward(nullptr, dy.data());  // claims: written
    for (int64_t i = 0; i < in * out; ++i) ASSERT_EQ(store.grad(0)[i], added[i]) << i;
    lin.backward(nullptr, dy.data());  // the claim is spent: added
    for (int64_t i = 0; i < in * out; ++i) ASSERT_EQ(store.grad(0)[i], added[i] + added[i]) << i;
  }
}

TEST(Linear, RejectsBadSizes) { ParamStore store; EXPECT_THROW(Linear(store, "x", 0, 3), Error); }

TEST(LayerNorm, BackwardMatchesFiniteDifferences) {
  const int64_t N = 6, C = 20;
  ParamStore store;
  LayerNorm ln(store, "ln_1", C);
  store.allocate();
  Rng rng(2);
  randomize(store, rng, 0.3f);
  auto x = random_vector(N * C, rng), w = random_vector(N * C, rng), dres = random_vector(N * C, rng);
  auto loss = [&] {  // residual path included: loss = w . ln(x) + dres . x
    double s = dot(ln.forward(x.data(), N), w);
    for (size_t i = 0; i < x.size(); ++i) s += static_cast<double>(dres[i]) * x[i];
    return s;
  };
  ln.forward(x.data(), N);
  std::vector<float> dx(N * C);
  ln.backward(dx.data(), w.data(), dres.data());
  expect_grad_matches(x.data(), dx.data(), x.size(), loss, "dinp", rng, 40, {1e-2f, 2e-3, 2e-2});
  expect_param_grads_match(store, loss, rng, 20);
}

TEST(Embedding, BackwardMatchesFiniteDifferencesAndChecksTokens) {
  const int64_t B = 2, T = 4, C = 8, V = 5;
  ParamStore store;
  Embedding emb(store, "wte.weight", "wpe.weight", V, 6, C);
  store.allocate();
  Rng rng(3);
  emb.init(rng, 0.5f);
  std::vector<int32_t> tok = {0, 1, 1, 4, 2, 2, 2, 0};
  auto w = random_vector(B * T * C, rng);
  auto loss = [&] { return dot(emb.forward(tok.data(), B, T), w); };
  emb.forward(tok.data(), B, T);
  emb.backward(w.data());
  expect_param_grads_match(store, loss, rng, 30);
  tok[3] = 5;
  EXPECT_THROW(emb.forward(tok.data(), B, T), Error);
  tok[3] = 0;
  EXPECT_THROW(emb.forward(tok.data(), 1, 7), Error);  // T > max_T
}

class AttentionLayer : public ::testing::TestWithParam<bool> {};

TEST_P(AttentionLayer, BackwardMatchesFiniteDifferences) {
  const bool causal = GetParam();
  const int64_t B = 2, T = 5, C = 12, NH = 3;
  ParamStore store;
  SelfAttention attn(store, "attn", C, NH, causal);
  store.allocate();
  Rng rng(4 + causal);
  randomize(store, rng, 0.3f);
  auto x = random_vector(B * T * C, rng), w = random_vector(B * T * C, rng);
  Workspace ws{kernels::cpu_backend().allocator()};
  auto loss = [&] { return dot(attn.forward(x.data(), B, T), w); };
  attn.forward(x.data(), B, T);
  std::vector<float> dx(B * T * C);
  attn.backward(dx.data(), w.data(), ws);
  expect_grad_matches(x.data(), dx.data(), x.size(), loss, "dinp", rng, 40);
  expect_param_grads_match(store, loss, rng, 12);
}

INSTANTIATE_TEST_SUITE_P(CausalOrNot, AttentionLayer, ::testing::Bool());

TEST(SelfAttention, CausalOutputIgnoresTheFuture) {
  const int64_t T = 6, C = 8;
  ParamStore store;
  SelfAttention attn(store, "attn", C, 2, true);
  store.allocate();
  Rng rng(5);
  randomize(store, rng, 0.3f);
  auto x = random_vector(T * C, rng);
  std::vector<float> y0(attn.forward(x.data(), 1, T), attn.forward(x.data(), 1, T) + T * C);
  x[(T - 1) * C + 2] += 1.0f;  // change only the last position
  const float* y1 = attn.forward(x.data(), 1, T);
  for (int64_t i = 0; i < (T - 1) * C; ++i) ASSERT_EQ(y0[i], y1[i]) << i;
  EXPECT_THROW(SelfAttention(store, "bad", 10, 3, true), Error);
}

TEST(Mlp, BackwardMatchesFiniteDifferences) {
  const int64_t N = 4, C = 6;
  ParamStore store;
  Mlp mlp(store, "mlp", C);
  store.allocate();
  Rng rng(6);
  randomize(store, rng, 0.4f);
  auto x = random_vector(N * C, rng), res = random_vector(N * C, rng), w = random_vector(N * C, rng);
  Workspace ws{kernels::cpu_backend().allocator()};
  auto loss = [&] { return dot(mlp.forward(x.data(), N, res.data()), w); };
  mlp.forward(x.data(), N, res.data());
  std::vector<float> dx(N * C);
  mlp.backward(dx.data(), w.data(), ws);
  expect_grad_matches(x.data(), dx.data(), x.size(), loss, "dinp", rng, 24);
  expect_param_grads_match(store, loss, rng, 12);
}

class BlockLayer : public ::testing::TestWithParam<bool> {};

TEST_P(BlockLayer, BackwardMatchesFiniteDifferences) {
  const int64_t B = 2, T = 4, C = 8, NH = 2;
  ParamStore store;
  Block block(store, "h.0", C, NH, GetParam());
  store.allocate();
  Rng rng(7);
  randomize(store, rng, 0.3f);
  auto x = random_vector(B * T * C, rng), w = random_vector(B * T * C, rng);
  Workspace ws{kernels::cpu_backend().allocator()};
  auto loss = [&] { return dot(block.forward(x.data(), B, T), w); };
  block.forward(x.data(), B, T);
  auto dres = w;  // in place: d out in, d x out
  block.backward(dres.data(), ws);
  expect_grad_matches(x.data(), dres.data(), x.size(), loss, "dx", rng, 40);
  expect_param_grads_match(store, loss, rng, 8);
  for (const char* name : {"h.0.ln_1.weight", "h.0.attn.c_attn.weight", "h.0.attn.c_proj.bias",
                           "h.0.ln_2.bias", "h.0.mlp.c_fc.weight", "h.0.mlp.c_proj.weight"})
    EXPECT_NE(store.find(name), nullptr) << name;
  EXPECT_EQ(store.find("h.0.attn.c_attn.weight")->shape, (Shape{C, 3 * C}));
  EXPECT_EQ(store.find("h.0.mlp.c_fc.weight")->shape, (Shape{C, 4 * C}));
  EXPECT_FALSE(store.find("h.0.ln_1.weight")->weight_decay);
  EXPECT_FALSE(store.find("h.0.mlp.c_fc.bias")->weight_decay);
  EXPECT_TRUE(store.find("h.0.mlp.c_fc.weight")->weight_decay);
}

INSTANTIATE_TEST_SUITE_P(CausalOrNot, BlockLayer, ::testing::Bool());

TEST(SoftmaxCrossEntropy, MeanLossGradientAndTargetCheck) {
  const int64_t N = 5, V = 7;
  Rng rng(8);
  auto z = random_vector(N * V, rng, 2.0f);
  std::vector<int32_t> tgt = {0, 6, 3, 3, 1};
  SoftmaxCrossEntropy xent(kernels::cpu_backend());
  auto loss = [&] { return static_cast<double>(xent.forward(z.data(), tgt.data(), N, V).loss); };
  const ForwardResult r = xent.forward(z.data(), tgt.data(), N, V);
  EXPECT_EQ(r.count, N);
  std::vector<float> dz(N * V);
  xent.backward(dz.data());
  expect_grad_matches(z.data(), dz.data(), z.size(), loss, "dlogits", rng, 35, {1e-2f, 2e-4, 2e-2});
  tgt[2] = 7;
  EXPECT_THROW(xent.forward(z.data(), tgt.data(), N, V), Error);
}

// The fused classifier's blocks of rows (nn/gpt.hpp): the same loss, hits
// and gradient bits as the whole-logits forward and backward.
TEST(SoftmaxCrossEntropy, RowBlocksGiveTheWholeForwardsBits) {
  const int64_t N = 11, V = 9;
  Rng rng(4);
  const auto z = random_vector(N * V, rng, 3.0f);
  std::vector<int32_t> tgt(N);
  for (int64_t n = 0; n < N; ++n) tgt[size_t(n)] = int32_t((n * 5) % V);
  SoftmaxCrossEntropy whole(kernels::cpu_backend()), blocks(kernels::cpu_backend());
  const ForwardResult a = whole.forward(z.data(), tgt.data(), N, V);
  std::vector<float> dz(N * V);
  whole.backward(dz.data());
  std::vector<float> g = z;  // each block's logits become their gradient in place
  blocks.begin(tgt.data(), N, V);
  for (int64_t r0 = 0; r0 < N; r0 += 4) blocks.rows(g.data() + r0 * V, r0, std::min<int64_t>(4, N - r0));
  const ForwardResult b = blocks.finish();
  EXPECT_EQ(a.loss, b.loss);
  EXPECT_EQ(a.correct, b.correct);
  EXPECT_EQ(b.count, N);
  EXPECT_EQ(0, std::memcmp(dz.data(), g.data(), dz.size() * sizeof(float)));
  tgt[3] = -1;
  EXPECT_THROW(blocks.begin(tgt.data(), N, V), Error);
}

}  // namespace
}  // namespace meshtrain::nn
