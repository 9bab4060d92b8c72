// The vocabulary-parallel loss's CUDA kernels (kernels/cuda/vocab_shard.hpp)
// against the CPU's (kernels/cross_entropy.hpp) on the second half of
// GPT-2's vocabulary (columns [25128, 50257) of every row: a shard of 25129,
// an odd width), N = 3 x 37 rows, targets inside and outside the shard, a
// tie for the row max: the max and argmax bit for bit, the exp sums and the
// gradient within 1e-5 relative (sums in another order), outputs poisoned
// first, and a second run with the same bits; the rows' steps between the
// all-reduces (argmax candidates bit for bit; lse and loss within 1 ulp of
// log's, hits exactly).
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "gpu_test_util.hpp"
#include "kernel_compare.hpp"
#include "meshtrain/kernels/cross_entropy.hpp"
#include "meshtrain/kernels/cuda/vocab_shard.hpp"

namespace meshtrain::kernels::cuda {
namespace {

using test::expect_close;
using test::expect_same_bits;
using test::poisoned;
using test::random_floats;
using test::to_device;
using test::to_host;

constexpr int64_t kRows = 3 * 37, kWhole = 50257, kFirst = 25128, kShard = kWhole - kFirst;

struct Shard {
  std::vector<float> logits;      // (rows, shard)
  std::vector<int32_t> targets;   // whole-vocabulary ids
  std::vector<float> mx, lse;     // the CPU's row max and a whole-row lse stand-in
};

Shard make_shard() {
  Shard s{random_floats(kRows * kShard, 91, -8.0f, 8.0f), std::vector<int32_t>(kRows), {}, {}};
  s.logits[4 * kShard + 10] = s.logits[4 * kShard + 9000] = 9.5f;  // row 4: first max at 10
  std::mt19937_64 rng(92);
  for (int64_t n = 0; n < kRows; ++n) s.targets[n] = int32_t(rng() % kWhole);  // about half in the shard
  s.targets[7] = int32_t(kFirst);                                             // its first column
  s.targets[8] = int32_t(kFirst - 1);                                         // just outside
  s.mx.resize(kRows);
  std::vector<int32_t> arg(kRows);
  kernels::row_max_argmax(s.mx.data(), arg.data(), s.logits.data(), kRows, kShard);
  s.lse.resize(kRows);
  for (int64_t n = 0; n < kRows; ++n) s.lse[n] = s.mx[n] + 3.0f;  // any value: the backward's input
  return s;
}

TEST(CudaVocabShard, RowMaxAndArgmaxAreTheCpus) {
  MESHTRAIN_REQUIRE_GPU();
  CudaAllocator alloc;
  const Shard s = make_shard();
  std::vector<float> mx(kRows);
  std::vector<int32_t> arg(kRows);
  kernels::row_max_argmax(mx.data(), arg.data(), s.logits.data(), kRows, kShard);
  auto d_logits = to_device(alloc, s.logits);
  for (int run = 0; run < 2; ++run) {
    auto d_mx = poisoned<float>(alloc, kRows);
    auto d_arg = poisoned<int32_t>(alloc, kRows);
    row_max_argmax(d_mx.ptr().raw(), d_arg.ptr().raw(), d_logits.ptr().raw(), kRows, kShard, nullptr);
    expect_same_bits(to_host(d_mx), mx, "row max");
    expect_same_bits(to_host(d_arg), arg, "argmax (first maximum)");
  }
}

TEST(CudaVocabShard, ExpSumsAndTargetLogitsMatchTheCpu) {
  MESHTRAIN_REQUIRE_GPU();
  CudaAllocator alloc;
  const Shard s = make_shard();
  std::vector<float> sumexp(kRows), target(kRows);
  kernels::softmax_xent_shard_sums(sumexp.data(), target.data(), s.logits.data(), s.mx.data(), s.targets.data(),
                                   kRows, kShard, kFirst);
  auto d_logits = to_device(alloc, s.logits);
  auto d_mx = to_device(alloc, s.mx);
  auto d_targets = to_device(alloc, s.targets);
  std::vector<float> first;
  for (int run = 0; run < 2; ++run) {
    auto d_sum = poisoned<float>(alloc, kRows), d_target = poisoned<float>(alloc, kRows);
    softmax_xent_shard_sums(d_sum.ptr().raw(), d_target.ptr().raw(), d_logits.ptr().raw(), d_mx.ptr().raw(),
                            d_targets.ptr().raw(), kRows, kShard, kFirst, nullptr);
    expect_close(to_host(d_sum), sumexp, 1e-5, "exp sums");
    expect_same_bits(to_host(d_target), target, "target logits (0 outside the shard)");
    if (run == 0) first = to_host(d_sum);
    if (run == 1) expect_same_bits(to_host(d_sum), first, "exp sums, second run");
  }
}

TEST(CudaVocabShard, BackwardMatchesTheCpuInPlaceAndApart) {
  MESHTRAIN_REQUIRE_GPU();
  CudaAllocator alloc;
  const Shard s = make_shard();
  const float dloss = 1.0f / float(kRows);
  std::vector<float> want(kRows * kShard);
  kernels::softmax_xent_backward(want.data(), s.logits.data(), s.lse.data(), s.targets.data(), kRows, kShard, dloss,
                                 kFirst);
  auto d_lse = to_device(alloc, s.lse);
  auto d_targets = to_device(alloc, s.targets);
  auto d_apart = poisoned<float>(alloc, kRows * kShard);
  auto d_logits = to_device(alloc, s.logits);
  softmax_xent_shard_backward(d_apart.ptr().raw(), d_logits.ptr().raw(), d_lse.ptr().raw(), d_targets.ptr().raw(),
                              kRows, kShard, dloss, kFirst, nullptr);
  expect_close(to_host(d_apart), want, 1e-5, "dlogits into another array");
  softmax_xent_shard_backward(d_logits.ptr().raw(), d_logits.ptr().raw(), d_lse.ptr().raw(), d_targets.ptr().raw(),
                              kRows, kShard, dloss, kFirst, nullptr);
  expect_same_bits(to_host(d_logits), to_host(d_apart), "in place: the same bits");
}

TEST(CudaVocabShard, TheRowsStepsBetweenTheAllReducesMatchTheCpu) {
  MESHTRAIN_REQUIRE_GPU();
  CudaAllocator alloc;
  const Shard s = make_shard();
  std::vector<float> local(kRows), sumexp(kRows), target(kRows);
  std::vector<int32_t> arg(kRows);
  kernels::row_max_argmax(local.data(), arg.data(), s.logits.data(), kRows, kShard);
  std::vector<float> row_max = local;
  for (int64_t n = 0; n < kRows; n += 3) row_max[n] += 1.0f;  // another shard holds these rows' max
  kernels::softmax_xent_shard_sums(sumexp.data(), target.data(), s.logits.data(), row_max.data(), s.targets.data(),
                                   kRows, kShard, kFirst);
  std::vector<int32_t> want_arg = arg;
  kernels::shard_argmax_candidates(want_arg.data(), local.data(), row_max.data(), kRows, kFirst, kWhole);
  auto d_arg = to_device(alloc, arg);
  auto d_local = to_device(alloc, local);
  auto d_max = to_device(alloc, row_max);
  shard_argmax_candidates(d_arg.ptr().raw(), d_local.ptr().raw(), d_max.ptr().raw(), kRows, kFirst, kWhole, nullptr);
  expect_same_bits(to_host(d_arg), want_arg, "argmax candidates (V where another shard holds the max)");

  std::vector<float> lse(kRows), loss(kRows), hit(kRows);
  kernels::shard_loss_rows(lse.data(), loss.data(), hit.data(), row_max.data(), sumexp.data(), target.data(),
                           want_arg.data(), s.targets.data(), kRows);
  auto d_sum = to_device(alloc, sumexp);
  auto d_target = to_device(alloc, target);
  auto d_targets = to_device(alloc, s.targets);
  auto d_lse = poisoned<float>(alloc, kRows), d_loss = poisoned<float>(alloc, kRows), d_hit = poisoned<float>(alloc, kRows);
  shard_loss_rows(d_lse.ptr().raw(), d_loss.ptr().raw(), d_hit.ptr().raw(), d_max.ptr().raw(), d_sum.ptr().raw(),
                  d_target.ptr().raw(), d_arg.ptr().raw(), d_targets.ptr().raw(), kRows, nullptr);
  expect_close(to_host(d_lse), lse, 1e-6, "lse");
  expect_close(to_host(d_loss), loss, 1e-5, "loss");
  expect_same_bits(to_host(d_hit), hit, "hits");
}

}  // namespace
}  // namespace meshtrain::kernels::cuda
