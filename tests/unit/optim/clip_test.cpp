// Global-norm clipping, range norms, and bitwise reproducibility across
// OpenMP thread counts (clipping and every optimizer).
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "meshtrain/core/device_array.hpp"
#include "meshtrain/core/error.hpp"
#include "meshtrain/kernels/guarded_backend.hpp"
#include "meshtrain/optim/clip.hpp"
#include "meshtrain/optim/factory.hpp"

namespace meshtrain {
namespace {

// Views of awkward sizes so chunks end mid-vector and views span many chunks.
void declare_big_store(ParamStore& s) {
  s.declare("a", {37, 1001}, true);
  s.declare("bias", {1001}, false);
  s.declare("c", {5, 4099}, true);
}

void make_big_store(ParamStore& s) {
  declare_big_store(s);
  s.allocate();
  for (size_t i = 0; i < s.flat_size(); ++i) {
    s.params()[i] = float(std::sin(0.37 * double(i)));
    s.grads()[i] = float(0.01 * std::cos(1.7 * double(i)) * (1 + double(i % 97)));
  }
}

double norm_in_double(const ParamStore& s) {
  double sum = 0;
  for (float g : s.grads()) sum += double(g) * double(g);
  return std::sqrt(sum);
}

// Runs f with n OpenMP threads, restoring the previous setting.
template <class F>
void with_threads(int n, F f) {
  const int before = omp_get_max_threads();
  omp_set_num_threads(n);
  f();
  omp_set_num_threads(before);
}

TEST(ClipGradNorm, ReducesNormToMaxNorm) {
  ParamStore s;
  make_big_store(s);
  const double before = norm_in_double(s);
  ASSERT_GT(before, 2.0);
  const float returned = clip_grad_norm(s, 1.0f);
  EXPECT_NEAR(returned, before, 1e-6 * before);
  EXPECT_NEAR(norm_in_double(s), 1.0, 1e-5);
}

TEST(ClipGradNorm, LeavesSmallGradientsUntouched) {
  ParamStore s;
  make_big_store(s);
  std::vector<float> g0(s.grads().begin(), s.grads().end());
  const float returned = clip_grad_norm(s, 1e6f);
  EXPECT_NEAR(returned, norm_in_double(s), 1e-6 * returned);
  EXPECT_EQ(std::memcmp(g0.data(), s.grads().data(), g0.size() * sizeof(float)), 0);
}

TEST(ClipGradNorm, NonFiniteNormLeavesGradientsAlone) {
  ParamStore s;
  make_big_store(s);
  s.grads()[5] = INFINITY;
  EXPECT_TRUE(std::isinf(clip_grad_norm(s, 1.0f)));
  EXPECT_EQ(s.grads()[5], INFINITY);
  EXPECT_NE(s.grads()[6], 0.0f);
}

TEST(ClipGradNorm, SameBitsForOneAndTwoThreads) {
  ParamStore s1, s2;
  make_big_store(s1);
  make_big_store(s2);
  float n1 = 0, n2 = 0;
  with_threads(1, [&] { n1 = clip_grad_norm(s1, 0.5f); });
  with_threads(2, [&] { n2 = clip_grad_norm(s2, 0.5f); });
  EXPECT_EQ(std::memcmp(&n1, &n2, sizeof n1), 0);
  EXPECT_EQ(std::memcmp(s1.grads().data(), s2.grads().data(), s1.grads().size_bytes()), 0);
  double d1 = 0, d2 = 0;
  with_threads(1, [&] { d1 = squared_norm_range(s1.grads(), 17, s1.flat_size() - 3); });
  with_threads(2, [&] { d2 = squared_norm_range(s1.grads(), 17, s1.flat_size() - 3); });
  EXPECT_EQ(std::memcmp(&d1, &d2, sizeof d1), 0);
}

TEST(ClipGradNorm, OnADeviceClipsThroughItsBackendWithTheCpusBits) {
  ParamStore host, device;
  make_big_store(host);
  kernels::Backend& guarded = kernels::guarded_backend();
  declare_big_store(device);
  device.set_device(guarded.device(), &guarded.allocator());
  device.allocate();
  DeviceArray<float> staged(guarded.allocator(), MemoryKind::Gradients);
  staged.ensure(host.flat_size());
  staged.upload(std::vector<float>(host.grads().begin(), host.grads().end()));
  guarded.copy(device.kernel_grads().data(), staged.raw(), host.flat_size());
  const float on_host = clip_grad_norm(host, 0.5f), on_device = clip_grad_norm(device, 0.5f);
  EXPECT_EQ(std::memcmp(&on_host, &on_device, sizeof on_host), 0);
  std::vector<float> clipped(device.flat_size());
  device.download_grads(clipped);
  EXPECT_EQ(std::memcmp(clipped.data(), host.grads().data(), host.grads().size_bytes()), 0);
  EXPECT_EQ(grad_squared_norm(device), grad_squared_norm(host));
}

TEST(SquaredNormRange, ShardsAddUpToTheWhole) {
  // What ZeRO will do: per-shard partial sums, added across ranks.
  ParamStore s;
  make_big_store(s);
  const size_t n = s.flat_size();
  const double whole = squared_norm_range(s.grads(), 0, n);
  const size_t cuts[] = {0, 1, 4096, 10000, n / 2, n - 1, n};
  double parts = 0;
  for (size_t k = 0; k + 1 < std::size(cuts); ++k) parts += squared_norm_range(s.grads(), cuts[k], cuts[k + 1]);
  EXPECT_NEAR(parts, whole, 1e-12 * whole);
  EXPECT_EQ(squared_norm_range(s.grads(), 5, 5), 0.0);
  EXPECT_THROW(squared_norm_range(s.grads(), 0, n + 1), Error);
}

TEST(ClipCoefficient, MatchesTorchFormula) {
  EXPECT_FLOAT_EQ(clip_coefficient(4.0, 1.0f), float(1.0 / (4.0 + 1e-6)));
  EXPECT_EQ(clip_coefficient(0.5, 1.0f), 1.0f);
  EXPECT_EQ(clip_coefficient(NAN, 1.0f), 1.0f);
}

class OptimizerThreads : public ::testing::TestWithParam<const char*> {};

TEST_P(OptimizerThreads, SameBitsForOneAndTwoThreads) {
  ParamStore s1, s2;
  make_big_store(s1);
  make_big_store(s2);
  OptimizerConfig c;
  c.kind = *parse_enum<OptimizerKind>(GetParam());
  c.weight_decay = 0.01;
  auto o1 = make_optimizer(c, s1), o2 = make_optimizer(c, s2);
  with_threads(1, [&] { for (int k = 0; k < 3; ++k) o1->step(s1, 0.01f); });
  with_threads(2, [&] { for (int k = 0; k < 3; ++k) o2->step(s2, 0.01f); });
  EXPECT_EQ(std::memcmp(s1.params().data(), s2.params().data(), s1.params().size_bytes()), 0);
  auto b1 = o1->state_buffers(), b2 = o2->state_buffers();
  ASSERT_EQ(b1.size(), b2.size());
  for (size_t k = 0; k < b1.size(); ++k)
    EXPECT_EQ(b1[k].second->to_host(), b2[k].second->to_host()) << b1[k].first;
}

INSTANTIATE_TEST_SUITE_P(All, OptimizerThreads, ::testing::Values("sgd", "adamw", "lars", "lamb"));

}  // namespace
}  // namespace meshtrain
