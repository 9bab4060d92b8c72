// The guarded device (training.device = "cpu-guarded"): its memory faults on
// a host access outside a backend call or the allocator's own copies, a
// backend call computes what the CPU's computes, and a kernel or a copy
// given host memory where a GPU's needs its own is refused, naming the call.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "meshtrain/core/device_array.hpp"
#include "meshtrain/core/error.hpp"
#include "meshtrain/kernels/backend.hpp"
#include "meshtrain/kernels/guarded_backend.hpp"

namespace meshtrain::kernels {
namespace {

TEST(GuardedBackend, IsTheGuardedDevice) {
  EXPECT_EQ(backend_for(Device{DeviceKind::GuardedCpu, 0}).device().kind, DeviceKind::GuardedCpu);
  EXPECT_EQ(guarded_backend().allocator().name(), "cpu-guarded");
  EXPECT_EQ(device_name(guarded_backend().device()), "cpu-guarded");
}

TEST(GuardedBackend, KernelsSeeTheMemoryAndComputeTheCpusValues) {
  Backend& guarded = guarded_backend();
  DeviceArray<float> a(guarded.allocator(), MemoryKind::Activations), b(guarded.allocator(), MemoryKind::Activations);
  const std::vector<float> x{1.5f, -2.0f, 3.25f, 0.5f, 7.0f};
  a.ensure(x.size());
  b.ensure(x.size());
  a.upload(x);
  guarded.gelu_forward(b.raw(), a.raw(), int64_t(x.size()));
  std::vector<float> want(x.size());
  cpu_backend().gelu_forward(want.data(), x.data(), int64_t(x.size()));
  EXPECT_EQ(b.to_host(), want);
  EXPECT_EQ(guarded.sum_in_order(a.raw(), x.size()), 1.5 - 2.0 + 3.25 + 0.5 + 7.0);
  // Two runs (a loss's rows and its hits) come back in one wait.
  const int64_t syncs = guarded.host_syncs();
  double sums[2];
  guarded.sums_in_order(a.raw(), 2, 2, sums);
  EXPECT_EQ(sums[0], 1.5 - 2.0);
  EXPECT_EQ(sums[1], 3.25 + 0.5);
  EXPECT_EQ(guarded.host_syncs() - syncs, 1);
}

TEST(GuardedBackend, AKernelOrACopyGivenHostMemoryForTheDevicesIsRefused) {
  Backend& guarded = guarded_backend();
  DeviceArray<float> a(guarded.allocator(), MemoryKind::Activations);
  a.ensure(4);
  std::vector<float> host(4, 1.0f);
  const auto refused = [](auto&& call, const std::string& names) {
    try {
      call();
    } catch (const DeviceError& e) {
      EXPECT_NE(std::string(e.what()).find(names), std::string::npos) << e.what();
      return;
    }
    ADD_FAILURE() << "not refused: " << names;
  };
  refused([&] { guarded.gelu_forward(a.raw(), host.data(), 4); }, "gelu_forward's pointer argument 2 is host memory");
  refused([&] { guarded.gelu_forward(host.data(), a.raw(), 4); }, "gelu_forward's pointer argument 1 is host memory");
  refused([&] { guarded.allocator().upload(host.data(), a.raw(), 16); }, "upload's destination is host memory");
  refused([&] { guarded.allocator().download(a.raw(), host.data(), 16); }, "download's source is host memory");
  int32_t arg[4] = {};
  refused([&] { guarded.shard_argmax_candidates(arg, a.raw(), a.raw(), 4, 0, 8); },
          "shard_argmax_candidates's pointer argument 1");
  // The host's results (a norm's sums) and optional pointers left null are not device pointers.
  double sums[2];
  guarded.sums_in_order(a.raw(), 2, 2, sums);
  guarded.fill_rows(a.raw(), nullptr, nullptr, 2, 2);
}

// A tensor-parallel norm's many ranges come back in one wait, each with
// squared_norm's bits.
TEST(GuardedBackend, ManySquaredNormsAreOneWaitWithEachRangesBits) {
  Backend& guarded = guarded_backend();
  std::vector<float> x(3 * 4096 + 123);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.001f * float(i % 997) - 0.4f;
  DeviceArray<float> a(guarded.allocator(), MemoryKind::Activations);
  a.ensure(x.size());
  a.upload(x);
  const std::vector<Backend::Range> ranges{{0, x.size()}, {100, 9000}, {7, 7}, {4096, 8192}};
  std::vector<double> got(ranges.size(), -1.0);
  const int64_t syncs = guarded.host_syncs();
  guarded.squared_norms(a.raw(), ranges, got.data());
  EXPECT_EQ(guarded.host_syncs() - syncs, 1);
  for (size_t i = 0; i < ranges.size(); ++i)
    EXPECT_EQ(got[i], cpu_backend().squared_norm(x.data(), ranges[i].begin, ranges[i].end)) << "range " << i;
}

TEST(GuardedBackendDeathTest, AHostReadOutsideAKernelFaults) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  DeviceArray<float> a(guarded_backend().allocator(), MemoryKind::Activations);
  a.resize(16);
  const float* p = a.raw();
  EXPECT_DEATH({ volatile float v = p[3]; (void)v; }, "");
}

}  // namespace
}  // namespace meshtrain::kernels
