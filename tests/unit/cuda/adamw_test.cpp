// The CUDA AdamW (kernels/cuda/adamw.hpp) against the CPU optimizer's
// element step (kernels::adamw_element, which optim/adamw.cpp loops over):
// the same AdamWStep gives the same bits for every element, over a list of
// ragged chunks with and without weight decay, over one flat range, and
// with a gradient scale (clipping folded into the update).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "gpu_test_util.hpp"
#include "kernel_compare.hpp"
#include "meshtrain/kernels/adamw_math.hpp"
#include "meshtrain/kernels/cuda/adamw.hpp"

namespace meshtrain::kernels::cuda {
namespace {

using test::expect_same_bits;
using test::random_floats;
using test::to_device;
using test::to_host;

// Step 3 of lr 3e-4, betas (0.9, 0.95), eps 1e-8, weight decay 0.1, formed
// as optim/adamw.cpp forms it: in double, rounded once.
AdamWStep step3() {
  const double lr = 3e-4, wd = 0.1, b1 = 0.9, b2 = 0.95, eps = 1e-8, t = 3;
  return AdamWStep{.decay_factor = float(1.0 - lr * wd),
                   .one_minus_b1 = float(1.0 - b1),
                   .b2 = float(b2),
                   .one_minus_b2 = float(1.0 - b2),
                   .step_size = float(lr / (1.0 - std::pow(b1, t))),
                   .bc2_sqrt = float(std::sqrt(1.0 - std::pow(b2, t))),
                   .eps = float(eps)};
}

struct State {
  std::vector<float> w, g, m, v;
  explicit State(size_t n)
      : w(random_floats(n, 21)), g(random_floats(n, 22, -0.1f, 0.1f)), m(random_floats(n, 23, -0.01f, 0.01f)),
        v(random_floats(n, 24, 0.0f, 1e-4f)) {
    g[0] = 0;  // an exact zero gradient and second moment
    v[0] = 0;
  }
};

// The CPU's update of elements [lo, hi), gradients scaled first when scale != 1.
void cpu_update(State& s, size_t lo, size_t hi, bool decay, const AdamWStep& step, float scale) {
  for (size_t i = lo; i < hi; ++i) {
    const float g = scale != 1.0f ? s.g[i] * scale : s.g[i];
    adamw_element(s.w[i], g, s.m[i], s.v[i], decay ? step.decay_factor : 1.0f, step);
  }
}

void expect_state(const State& cpu, const DeviceBuffer<float>& w, const DeviceBuffer<float>& m,
                  const DeviceBuffer<float>& v, const char* what) {
  SCOPED_TRACE(what);
  expect_same_bits(to_host(w), cpu.w, "param");
  expect_same_bits(to_host(m), cpu.m, "exp_avg");
  expect_same_bits(to_host(v), cpu.v, "exp_avg_sq");
}

TEST(CudaAdamW, ChunkListHasTheCpuBits) {
  MESHTRAIN_REQUIRE_GPU();
  CudaAllocator alloc;
  // Ragged chunks, back to back (so most start at odd offsets), with and
  // without decay; the largest sizes the grid.
  const size_t sizes[] = {4096, 1000, 1, 37, 4096, 70001, 3};
  size_t total = 0;
  for (size_t s : sizes) total += s;
  State cpu(total);
  const AdamWStep step = step3();

  auto w = to_device(alloc, cpu.w), g = to_device(alloc, cpu.g), m = to_device(alloc, cpu.m),
       v = to_device(alloc, cpu.v);
  std::vector<AdamWChunk> chunks;
  size_t at = 0, largest = 0;
  for (size_t i = 0; i < std::size(sizes); ++i) {
    const bool decay = i % 2 == 0;
    chunks.push_back(AdamWChunk{w.ptr().raw() + at, g.ptr().raw() + at, m.ptr().raw() + at, v.ptr().raw() + at,
                                int64_t(sizes[i]), decay ? 1 : 0});
    cpu_update(cpu, at, at + sizes[i], decay, step, 1.0f);
    at += sizes[i];
    largest = std::max(largest, sizes[i]);
  }
  auto d_chunks = to_device(alloc, chunks);
  adamw_update(d_chunks.ptr().raw(), int64_t(chunks.size()), int64_t(largest), step, nullptr, nullptr);
  expect_state(cpu, w, m, v, "chunks");

  // A second step with a gradient scale (a clip factor on the device).
  const float scale = 0.37f;
  at = 0;
  for (size_t i = 0; i < std::size(sizes); ++i) {
    cpu_update(cpu, at, at + sizes[i], i % 2 == 0, step, scale);
    at += sizes[i];
  }
  auto d_scale = to_device(alloc, std::vector<float>{scale});
  adamw_update(d_chunks.ptr().raw(), int64_t(chunks.size()), int64_t(largest), step, d_scale.ptr().raw(), nullptr);
  expect_state(cpu, w, m, v, "chunks, scaled gradients");
}

TEST(CudaAdamW, FlatRangeHasTheCpuBits) {
  MESHTRAIN_REQUIRE_GPU();
  CudaAllocator alloc;
  const size_t n = 1000003;
  State cpu(n);
  const AdamWStep step = step3();
  auto w = to_device(alloc, cpu.w), g = to_device(alloc, cpu.g), m = to_device(alloc, cpu.m),
       v = to_device(alloc, cpu.v);
  cpu_update(cpu, 0, n, true, step, 1.0f);
  adamw_update(w.ptr().raw(), g.ptr().raw(), m.ptr().raw(), v.ptr().raw(), int64_t(n), true, step, nullptr, nullptr);
  expect_state(cpu, w, m, v, "flat, decay");
  cpu_update(cpu, 0, n, false, step, 1.0f);
  adamw_update(w.ptr().raw(), g.ptr().raw(), m.ptr().raw(), v.ptr().raw(), int64_t(n), false, step, nullptr, nullptr);
  expect_state(cpu, w, m, v, "flat, no decay");
}

}  // namespace
}  // namespace meshtrain::kernels::cuda
