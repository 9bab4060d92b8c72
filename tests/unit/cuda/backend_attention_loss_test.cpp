// The GPU backend's attention and loss against the CPU backend's, through
// the calls the layers make (kernels/backend.hpp). Their saved states
// differ (the CPU keeps the probabilities, the GPU the log-sum-exp), so the
// comparison is of what the layers read: attention's output and dqkv, the
// loss's rows, hits and dlogits. Ragged shapes: T = 37, V = 50257.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "gpu_test_util.hpp"
#include "kernel_compare.hpp"
#include "meshtrain/kernels/backend.hpp"
#include "meshtrain/kernels/cuda/cuda_backend.hpp"
#include "meshtrain/kernels/cuda/cuda_memory.hpp"

namespace meshtrain::kernels::cuda {
namespace {

using test::expect_close;
using test::random_floats;
using test::to_host;

Backend& gpu() { return backend(0); }
CudaAllocator& gpu_memory() { return dynamic_cast<CudaAllocator&>(gpu().allocator()); }

TEST(CudaBackendAttention, OutputAndGradientMatchTheCpuBackend) {
  MESHTRAIN_REQUIRE_GPU();
  const int64_t B = 2, T = 37, NH = 3, C = NH * 64;
  const std::vector<float> qkv = random_floats(size_t(B * T * 3 * C), 11);
  const std::vector<float> dout = random_floats(size_t(B * T * C), 12);
  // CPU
  AttentionSaved cpu_saved{cpu_backend().allocator()};
  std::vector<float> out(size_t(B * T * C)), dqkv(qkv.size());
  std::vector<float> scratch(cpu_backend().attention_backward_scratch(cpu_saved, B, T, NH, false));
  cpu_backend().attention_forward(out.data(), cpu_saved, qkv.data(), B, T, C, NH, true);
  cpu_backend().attention_backward(dqkv.data(), dout.data(), out.data(), cpu_saved, qkv.data(), B, T, C, NH, true,
                                   scratch.data());
  // GPU, twice: the same bits
  auto d_qkv = test::to_device(gpu_memory(), qkv);
  auto d_dout = test::to_device(gpu_memory(), dout);
  std::vector<float> first_dqkv;
  for (int run = 0; run < 2; ++run) {
    AttentionSaved saved{gpu_memory()};
    auto d_out = test::poisoned<float>(gpu_memory(), out.size());
    auto d_dqkv = test::poisoned<float>(gpu_memory(), dqkv.size());
    DeviceBuffer<float> d_scratch(gpu_memory(), gpu().attention_backward_scratch(saved, B, T, NH, false),
                                   MemoryKind::Other);
    gpu().attention_forward(d_out.ptr().raw(), saved, d_qkv.ptr().raw(), B, T, C, NH, true);
    gpu().attention_recompute(saved, d_qkv.ptr().raw(), B, T, C, NH, true);  // nothing to redo
    gpu().attention_backward(d_dqkv.ptr().raw(), d_dout.ptr().raw(), d_out.ptr().raw(), saved, d_qkv.ptr().raw(), B,
                             T, C, NH, true, d_scratch.ptr().raw());
    expect_close(to_host(d_out), out, 1e-5, "attention out");
    const std::vector<float> got = to_host(d_dqkv);
    expect_close(got, dqkv, 1e-4, "attention dqkv");
    if (run == 0) first_dqkv = got;
    else EXPECT_EQ(std::memcmp(first_dqkv.data(), got.data(), got.size() * sizeof(float)), 0) << "dqkv repeats";
  }
}

TEST(CudaBackendLoss, RowsHitsAndGradientMatchTheCpuBackend) {
  MESHTRAIN_REQUIRE_GPU();
  const int64_t N = 37, V = 50257;
  const std::vector<float> logits = random_floats(size_t(N * V), 21, -4.0f, 4.0f);
  std::vector<int32_t> targets(N);
  std::mt19937 rng(5);
  for (int32_t& t : targets) t = int32_t(rng() % uint32_t(V));
  targets[3] = 0;
  targets[4] = int32_t(V - 1);
  // loss: the rows, then the hits (1 or 0), as SoftmaxCrossEntropy keeps them.
  std::vector<float> lse(N), loss(2 * N), dlogits(logits.size());
  cpu_backend().softmax_xent_forward(lse.data(), loss.data(), loss.data() + N, logits.data(), targets.data(), N, V);
  cpu_backend().softmax_xent_backward(dlogits.data(), logits.data(), lse.data(), targets.data(), N, V, 1.0f / N);

  auto d_logits = test::to_device(gpu_memory(), logits);
  auto d_targets = test::to_device(gpu_memory(), targets);
  auto d_lse = test::poisoned<float>(gpu_memory(), size_t(N));
  auto d_loss = test::poisoned<float>(gpu_memory(), size_t(2 * N));
  gpu().softmax_xent_forward(d_lse.ptr().raw(), d_loss.ptr().raw(), d_loss.ptr().raw() + N, d_logits.ptr().raw(),
                             d_targets.ptr().raw(), N, V);
  expect_close(to_host(d_lse), lse, 1e-5, "lse");
  expect_close(to_host(d_loss), loss, 1e-5, "loss rows and hits");
  double gpu_sums[2], cpu_sums[2];  // loss, hits: one download
  gpu().sums_in_order(d_loss.ptr().raw(), size_t(N), 2, gpu_sums);
  cpu_backend().sums_in_order(loss.data(), size_t(N), 2, cpu_sums);
  EXPECT_NEAR(gpu_sums[0], cpu_sums[0], 1e-5 * N);
  EXPECT_EQ(gpu_sums[1], cpu_sums[1]);
  // In place, as the models run it.
  gpu().softmax_xent_backward(d_logits.ptr().raw(), d_logits.ptr().raw(), d_lse.ptr().raw(), d_targets.ptr().raw(),
                              N, V, 1.0f / N);
  expect_close(to_host(d_logits), dlogits, 1e-5, "dlogits");
}

}  // namespace
}  // namespace meshtrain::kernels::cuda
