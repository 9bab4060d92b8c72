// The CUDA encoder (kernels/cuda/encoder.hpp) against the CPU's
// (kernels/embedding.hpp). Forward is one add per element: the same bits.
// Backward adds each element's terms in the CPU's order (increasing b, t),
// so it has the CPU's bits too, and a second run repeats them. Ragged
// shapes: T = 37, C = 96 (packs of 4) and C = 99 (element by element); a
// small vocabulary so tokens repeat (runs of every length) and some never
// appear.
#include <gtest/gtest.h>

#include <cstddef>
#include <random>
#include <vector>

#include "gpu_test_util.hpp"
#include "kernel_compare.hpp"
#include "meshtrain/kernels/cuda/encoder.hpp"
#include "meshtrain/kernels/embedding.hpp"

namespace meshtrain::kernels::cuda {
namespace {

using test::expect_same_bits;
using test::poisoned;
using test::random_floats;
using test::to_device;
using test::to_host;

constexpr int64_t B = 3, T = 37, V = 50;

std::vector<int32_t> random_tokens(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> tokens(B * T);
  for (int32_t& t : tokens) t = int32_t(rng() % (V - 5));  // ids V-5 .. V-1 never appear
  for (int64_t i = 0; i < 20; ++i) tokens[size_t(i * 3)] = 7;  // one long run
  return tokens;
}

class CudaEncoder : public ::testing::TestWithParam<int64_t> {};

TEST_P(CudaEncoder, ForwardHasTheCpuBits) {
  MESHTRAIN_REQUIRE_GPU();
  CudaAllocator alloc;
  const int64_t C = GetParam();
  const std::vector<int32_t> tokens = random_tokens(1);
  const std::vector<float> wte = random_floats(V * C, 2), wpe = random_floats((T + 5) * C, 3);
  std::vector<float> want(B * T * C);
  kernels::encoder_forward(want.data(), tokens.data(), wte.data(), wpe.data(), B, T, C);

  auto d_tokens = to_device(alloc, tokens);
  auto d_wte = to_device(alloc, wte), d_wpe = to_device(alloc, wpe);
  auto d_out = poisoned<float>(alloc, want.size());
  encoder_forward(d_out.ptr().raw(), d_tokens.ptr().raw(), d_wte.ptr().raw(), d_wpe.ptr().raw(), B, T, C, nullptr);
  expect_same_bits(to_host(d_out), want, "encoder_forward");
}

TEST_P(CudaEncoder, BackwardHasTheCpuBitsAndRepeats) {
  MESHTRAIN_REQUIRE_GPU();
  CudaAllocator alloc;
  const int64_t C = GetParam();
  const std::vector<int32_t> tokens = random_tokens(4);
  const std::vector<float> dout = random_floats(B * T * C, 5);
  // Accumulated into: start from nonzero gradients.
  const std::vector<float> dwte0 = random_floats(V * C, 6), dwpe0 = random_floats((T + 5) * C, 7);
  std::vector<float> dwte(dwte0), dwpe(dwpe0);
  kernels::encoder_backward(dwte.data(), dwpe.data(), dout.data(), tokens.data(), B, T, C);

  auto d_tokens = to_device(alloc, tokens);
  auto d_dout = to_device(alloc, dout);
  const size_t ws_bytes = encoder_backward_workspace_bytes(B, T);
  auto ws = poisoned<std::byte>(alloc, ws_bytes);
  std::vector<float> first_dwte, first_dwpe;
  for (int run = 0; run < 2; ++run) {
    auto d_dwte = to_device(alloc, dwte0), d_dwpe = to_device(alloc, dwpe0);
    encoder_backward(d_dwte.ptr().raw(), d_dwpe.ptr().raw(), d_dout.ptr().raw(), d_tokens.ptr().raw(), B, T, C,
                     ws.ptr().raw(), ws_bytes, nullptr);
    const std::vector<float> got_dwte = to_host(d_dwte), got_dwpe = to_host(d_dwpe);
    if (run == 0) {
      expect_same_bits(got_dwte, dwte, "dwte");
      expect_same_bits(got_dwpe, dwpe, "dwpe");  // rows T .. T+4 untouched
      first_dwte = got_dwte;
      first_dwpe = got_dwpe;
    } else {
      expect_same_bits(got_dwte, first_dwte, "dwte, second run");
      expect_same_bits(got_dwpe, first_dwpe, "dwpe, second run");
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Channels, CudaEncoder, ::testing::Values(int64_t(96), int64_t(99)));

}  // namespace
}  // namespace meshtrain::kernels::cuda
