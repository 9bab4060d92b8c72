// The CUDA fused classifier (kernels/cuda/classifier.hpp) against the CPU's
// softmax_xent_forward then softmax_xent_backward (kernels/cross_entropy.hpp)
// on B = 3, T = 37 rows of V = 50257 logits (rows start at every 4-byte
// phase of a 16-byte boundary): within 1e-5 relative (the row sums are
// taken in another order; the per-element gradient is the same
// expression), in place and into a separate array, plus ignored rows
// (target < 0) and a second run with the same bits.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gpu_test_util.hpp"
#include "kernel_compare.hpp"
#include "meshtrain/kernels/cross_entropy.hpp"
#include "meshtrain/kernels/cuda/classifier.hpp"

namespace meshtrain::kernels::cuda {
namespace {

using test::expect_close;
using test::expect_same_bits;
using test::poisoned;
using test::random_floats;
using test::to_device;
using test::to_host;

constexpr int64_t N = 3 * 37, V = 50257;
constexpr double kRel = 1e-5;

struct Case {
  std::vector<float> logits;   // (N, V)
  std::vector<int32_t> targets;  // (N)
};

// Logits in [-8, 8]; random targets, a third of them the row's argmax (so
// `correct` sees hits), one row with a tie for the max.
Case make_case() {
  Case c{random_floats(N * V, 71, -8.0f, 8.0f), std::vector<int32_t>(N)};
  c.logits[5 * V + 100] = c.logits[5 * V + 2000] = 9.0f;  // row 5: first max at 100
  std::vector<float> mx(N);
  std::vector<int32_t> arg(N);
  kernels::row_max_argmax(mx.data(), arg.data(), c.logits.data(), N, V);
  std::mt19937_64 rng(72);
  for (int64_t n = 0; n < N; ++n) c.targets[n] = n % 3 == 0 ? arg[n] : int32_t(rng() % V);
  c.targets[5] = 100;
  return c;
}

struct CpuResult {
  std::vector<float> lse, loss, dlogits;
  std::vector<float> correct;  // 1 or 0 per row, as the kernel writes it
};

// The CPU kernels on the rows' targets, with ignored rows (target < 0)
// computed with target 0 and then set as the GPU defines them: loss 0,
// correct 0, gradient 0; lse is the row's either way.
CpuResult cpu_reference(const Case& c, float dloss) {
  CpuResult r{std::vector<float>(N), std::vector<float>(N), std::vector<float>(N * V), std::vector<float>(N)};
  std::vector<int32_t> t(c.targets);
  for (int32_t& x : t) x = x < 0 ? 0 : x;
  kernels::softmax_xent_forward(r.lse.data(), r.loss.data(), r.correct.data(), c.logits.data(), t.data(), N, V);
  kernels::softmax_xent_backward(r.dlogits.data(), c.logits.data(), r.lse.data(), t.data(), N, V, dloss);
  for (int64_t n = 0; n < N; ++n) {
    if (c.targets[n] >= 0) continue;
    r.loss[n] = 0;
    r.correct[n] = 0.0f;
    for (int64_t j = 0; j < V; ++j) r.dlogits[n * V + j] = 0;
  }
  return r;
}

void expect_matches(const CpuResult& cpu, const std::vector<float>& lse, const std::vector<float>& loss,
                    const std::vector<float>& correct, const std::vector<float>& dlogits) {
  expect_close(lse, cpu.lse, kRel, "lse");
  expect_close(loss, cpu.loss, kRel, "loss");
  expect_same_bits(correct, cpu.correct, "correct");
  expect_close(dlogits, cpu.dlogits, kRel, "dlogits");
}

TEST(CudaClassifier, InPlaceMatchesTheCpu) {
  MESHTRAIN_REQUIRE_GPU();
  CudaAllocator alloc;
  const Case c = make_case();
  const float dloss = 1.0f / N;
  const CpuResult cpu = cpu_reference(c, dloss);

  auto d_logits = to_device(alloc, c.logits);
  auto d_targets = to_device(alloc, c.targets);
  auto d_lse = poisoned<float>(alloc, N), d_loss = poisoned<float>(alloc, N);
  auto d_correct = poisoned<float>(alloc, N);
  fused_classifier(d_lse.ptr().raw(), d_loss.ptr().raw(), d_correct.ptr().raw(), d_logits.ptr().raw(),
                   d_logits.ptr().raw(), d_targets.ptr().raw(), N, V, dloss, nullptr);
  expect_matches(cpu, to_host(d_lse), to_host(d_loss), to_host(d_correct), to_host(d_logits));
}

TEST(CudaClassifier, SeparateOutputIgnoredRowsAndRepeats) {
  MESHTRAIN_REQUIRE_GPU();
  CudaAllocator alloc;
  Case c = make_case();
  int64_t kept = 0;
  for (int64_t n = 0; n < N; ++n) {
    if (n % 5 == 2) c.targets[n] = -1;  // ignored (padding)
    kept += c.targets[n] >= 0;
  }
  const float dloss = 1.0f / float(kept);  // the mean over the rows not ignored
  const CpuResult cpu = cpu_reference(c, dloss);

  auto d_logits = to_device(alloc, c.logits);
  auto d_targets = to_device(alloc, c.targets);
  std::vector<float> first;
  for (int run = 0; run < 2; ++run) {
    // dlogits one float past a 16-byte boundary: its rows' phase differs
    // from the logits', so the kernel goes element by element.
    for (const int64_t offset : {int64_t(0), int64_t(1)}) {
      SCOPED_TRACE("run " + std::to_string(run) + ", dlogits offset " + std::to_string(offset));
      auto d_lse = poisoned<float>(alloc, N), d_loss = poisoned<float>(alloc, N);
      auto d_correct = poisoned<float>(alloc, N);
      auto d_dlogits = poisoned<float>(alloc, N * V + 1);
      fused_classifier(d_lse.ptr().raw(), d_loss.ptr().raw(), d_correct.ptr().raw(), d_dlogits.ptr().raw() + offset,
                       d_logits.ptr().raw(), d_targets.ptr().raw(), N, V, dloss, nullptr);
      std::vector<float> dlogits = to_host(d_dlogits);
      dlogits.erase(offset == 0 ? dlogits.end() - 1 : dlogits.begin());
      expect_matches(cpu, to_host(d_lse), to_host(d_loss), to_host(d_correct), dlogits);
      if (run == 0 && offset == 0) first = dlogits;
      if (run == 1 && offset == 0) expect_same_bits(dlogits, first, "dlogits, second run");
    }
  }
  expect_same_bits(to_host(d_logits), c.logits, "logits (dlogits is another array)");
}

TEST(CudaClassifier, ForwardOnlyLeavesTheLogits) {
  MESHTRAIN_REQUIRE_GPU();
  CudaAllocator alloc;
  const Case c = make_case();
  const CpuResult cpu = cpu_reference(c, 1.0f);
  auto d_logits = to_device(alloc, c.logits);
  auto d_targets = to_device(alloc, c.targets);
  auto d_lse = poisoned<float>(alloc, N), d_loss = poisoned<float>(alloc, N);
  fused_classifier(d_lse.ptr().raw(), d_loss.ptr().raw(), nullptr, nullptr, d_logits.ptr().raw(),
                   d_targets.ptr().raw(), N, V, 1.0f, nullptr);
  expect_close(to_host(d_lse), cpu.lse, kRel, "lse");
  expect_close(to_host(d_loss), cpu.loss, kRel, "loss");
  expect_same_bits(to_host(d_logits), c.logits, "logits (no dlogits)");
}

}  // namespace
}  // namespace meshtrain::kernels::cuda
