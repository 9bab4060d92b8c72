// SGD's, LARS's and LAMB's kernels through the GPU backend
// (kernels/cuda/momentum.hpp, kernels/cuda/lamb.hpp, the backend's chunk
// tables and per-view factors) against the CPU backend's, bit for bit:
// ragged chunks back to back (a whole 4096, odd sizes, one of a single
// element), decaying and not, three steps each (the table cached), then a
// table whose pointers moved (uploaded again, as after a ZeRO rebinding).
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <vector>

#include "gpu_test_util.hpp"
#include "kernel_compare.hpp"
#include "meshtrain/kernels/backend.hpp"
#include "meshtrain/kernels/cuda/cuda_backend.hpp"
#include "meshtrain/kernels/cuda/cuda_memory.hpp"

namespace meshtrain::kernels::cuda {
namespace {

using test::expect_same_bits;
using test::random_floats;
using test::to_host;

const int64_t kChunkSizes[] = {4096, 1000, 1, 37, 4096, 703};
constexpr size_t kTotal = 4096 + 1000 + 1 + 37 + 4096 + 703;

CudaAllocator& memory_of(Backend& b) { return dynamic_cast<CudaAllocator&>(b.allocator()); }

// Four runs of kTotal floats, on the CPU or on the GPU: parameters,
// gradients and two state buffers (momentum; LAMB's m and v).
struct Buffers {
  std::vector<float> w, g, s0, s1;
  Buffers()
      : w(random_floats(kTotal, 41)), g(random_floats(kTotal, 42, -0.1f, 0.1f)),
        s0(random_floats(kTotal, 43, -0.01f, 0.01f)), s1(random_floats(kTotal, 44, 0.0f, 1e-4f)) {}
};
struct GpuBuffers {
  DeviceBuffer<float> w, g, s0, s1;
  explicit GpuBuffers(const Buffers& b)
      : w(test::to_device(memory_of(backend(0)), b.w)), g(test::to_device(memory_of(backend(0)), b.g)),
        s0(test::to_device(memory_of(backend(0)), b.s0)), s1(test::to_device(memory_of(backend(0)), b.s1)) {}
};

template <class Make>
auto chunk_table(Make make) {
  std::vector<decltype(make(0, 0, 0))> out;
  int64_t at = 0;
  for (size_t c = 0; c < std::size(kChunkSizes); ++c) {
    out.push_back(make(at, c, kChunkSizes[c]));
    at += kChunkSizes[c];
  }
  return out;
}

void expect_same_sums(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_EQ(std::bit_cast<uint64_t>(got[i]), std::bit_cast<uint64_t>(want[i])) << "sum " << i;
}

TEST(CudaOptimizers, SgdAndLarsHaveTheCpuBits) {
  MESHTRAIN_REQUIRE_GPU();
  for (const bool momentum : {false, true}) {
    SCOPED_TRACE(momentum ? "momentum, Nesterov" : "no momentum");
    Buffers cpu_side;
    GpuBuffers gpu_side(cpu_side);
    auto make = [&](float* w, const float* g, float* buf) {
      return chunk_table([&](int64_t at, size_t c, int64_t n) {
        return MomentumChunk{w + at, g + at, momentum ? buf + at : nullptr, n, int32_t(c % 2 == 0), int32_t(c / 2)};
      });
    };
    const auto cpu_chunks = make(cpu_side.w.data(), cpu_side.g.data(), cpu_side.s0.data());
    const auto gpu_chunks = make(gpu_side.w.ptr().raw(), gpu_side.g.ptr().raw(), gpu_side.s0.ptr().raw());
    const MomentumStep step{
        .lr = 0.1f, .momentum = momentum ? 0.9f : 0.0f, .weight_decay = 1e-4f, .nesterov = momentum};
    for (int k = 0; k < 3; ++k) {
      std::vector<double> want(2 * cpu_chunks.size()), got(2 * gpu_chunks.size());
      cpu_backend().momentum_squares(cpu_chunks, want.data());
      backend(0).momentum_squares(gpu_chunks, got.data());
      expect_same_sums(got, want);
      const std::vector<float> trusts{0.011f, 0.5f, 1.0f};
      cpu_backend().momentum_update(cpu_chunks, k == 0 ? std::vector<float>{} : trusts, step);
      backend(0).momentum_update(gpu_chunks, k == 0 ? std::vector<float>{} : trusts, step);
    }
    expect_same_bits(to_host(gpu_side.w), cpu_side.w, "param");
    expect_same_bits(to_host(gpu_side.s0), cpu_side.s0, "momentum buffer");
  }
}

TEST(CudaOptimizers, LambHasTheCpuBitsAndFollowsMovedBuffers) {
  MESHTRAIN_REQUIRE_GPU();
  Buffers cpu_side;
  GpuBuffers first(cpu_side), second(cpu_side);
  auto make = [&](float* w, const float* g, float* m, float* v) {
    return chunk_table([&](int64_t at, size_t c, int64_t n) {
      return LambChunk{w + at, g + at, m + at, v + at, n, int32_t(c % 2 == 0), int32_t(c / 2)};
    });
  };
  const LambStep step{.b1 = 0.9f, .one_minus_b1 = 0.1f, .b2 = 0.999f, .one_minus_b2 = 0.001f, .bc1 = 0.271f,
                      .bc2_sqrt = 0.0547f, .eps = 1e-6f, .weight_decay = 0.01f};
  const std::vector<float> scales{0.003f, 0.01f, 0.0007f};
  for (GpuBuffers* gpu_side : {&first, &second}) {
    SCOPED_TRACE(gpu_side == &first ? "first buffers" : "moved buffers");
    Buffers cpu_copy = cpu_side;
    const auto cpu_run = make(cpu_copy.w.data(), cpu_copy.g.data(), cpu_copy.s0.data(), cpu_copy.s1.data());
    const auto gpu_chunks = make(gpu_side->w.ptr().raw(), gpu_side->g.ptr().raw(), gpu_side->s0.ptr().raw(),
                                 gpu_side->s1.ptr().raw());
    for (int k = 0; k < 3; ++k) {
      std::vector<double> want(2 * cpu_run.size()), got(2 * gpu_chunks.size());
      cpu_backend().lamb_moments(cpu_run, step, want.data());
      backend(0).lamb_moments(gpu_chunks, step, got.data());
      expect_same_sums(got, want);
      cpu_backend().lamb_apply(cpu_run, scales, step);
      backend(0).lamb_apply(gpu_chunks, scales, step);
    }
    expect_same_bits(to_host(gpu_side->w), cpu_copy.w, "param");
    expect_same_bits(to_host(gpu_side->s0), cpu_copy.s0, "exp_avg");
    expect_same_bits(to_host(gpu_side->s1), cpu_copy.s1, "exp_avg_sq");
  }
}

}  // namespace
}  // namespace meshtrain::kernels::cuda
