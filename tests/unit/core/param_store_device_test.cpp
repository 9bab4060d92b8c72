// A ParamStore on a device other than the CPU: its flat buffers live in that
// device's memory, the host spans are refused, values cross by upload and
// download, and a host read through a view's pointer faults. The "device"
// here is guarded host memory: pages that are PROT_NONE except while its
// allocator itself copies or fills them, so any other host access crashes,
// as a host access to GPU memory would.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <numeric>
#include <vector>

#include "meshtrain/core/error.hpp"
#include "meshtrain/core/param_store.hpp"

namespace meshtrain {
namespace {

class GuardedHostMemory final : public DeviceAllocator {
 public:
  void* allocate(size_t bytes) override {
    const size_t size = round_up(bytes);
    void* p = mmap(nullptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw Error("GuardedHostMemory: mmap failed");
    sizes_[p] = size;
    return p;
  }
  void release(void* p) noexcept override {
    munmap(p, sizes_[p]);
    sizes_.erase(p);
  }
  void zero(void* p, size_t bytes) override {
    open(p, [&] { std::memset(p, 0, bytes); });
  }
  void upload(void* dst, const void* src, size_t bytes) override {
    open(dst, [&] { std::memcpy(dst, src, bytes); });
  }
  void download(void* dst, const void* src, size_t bytes) override {
    open(const_cast<void*>(src), [&] { std::memcpy(dst, src, bytes); });
  }
  std::string name() const override { return "guarded host memory"; }
  size_t live_allocations() const { return sizes_.size(); }

 private:
  static size_t round_up(size_t bytes) {
    const size_t page = size_t(sysconf(_SC_PAGESIZE));
    return (bytes + page - 1) / page * page;
  }
  // The allocation holding p, readable and writable during f only.
  template <class F>
  void open(void* p, F f) {
    auto it = sizes_.upper_bound(p);
    --it;
    mprotect(it->first, it->second, PROT_READ | PROT_WRITE);
    f();
    mprotect(it->first, it->second, PROT_NONE);
  }
  std::map<void*, size_t> sizes_;
};

ParamStore device_store(GuardedHostMemory& memory) {
  ParamStore store;
  store.set_device(Device{DeviceKind::Cuda, 0}, &memory);
  store.declare("w", {3, 5}, true);
  store.declare("b", {5}, false);
  store.allocate();
  return store;
}

TEST(ParamStoreOnADevice, ValuesCrossOnlyByUploadAndDownload) {
  GuardedHostMemory memory;
  ParamStore store = device_store(memory);
  std::vector<float> flat(store.flat_size());
  std::iota(flat.begin(), flat.end(), 1.0f);
  store.upload_params(flat);
  std::vector<float> back(store.flat_size(), -1.0f);
  store.download_params(back);
  EXPECT_EQ(back, flat);
  // Allocated zeroed, and zero_grads() zeroes them again on the device.
  std::vector<float> grads(store.flat_size(), -1.0f);
  store.download_grads(grads);
  EXPECT_EQ(grads, std::vector<float>(store.flat_size(), 0.0f));
  store.zero_grads();
  EXPECT_TRUE(store.claim_zeroed_grad(0));
  // A view's pointer is the device buffer's, at the view's offset.
  EXPECT_EQ(store.param(1) - store.param(0), std::ptrdiff_t(store.view(1).offset));
  EXPECT_THROW(store.upload_params(std::vector<float>(3)), Error);
}

TEST(ParamStoreOnADevice, RangesCrossForTheHostStagedCollectives) {
  GuardedHostMemory memory;
  ParamStore store = device_store(memory);
  const size_t n = store.flat_size();
  std::vector<float> flat(n);
  std::iota(flat.begin(), flat.end(), 1.0f);
  store.upload_params(flat);
  std::vector<float> part(4);
  store.download_params_range(3, part);
  EXPECT_EQ(part, std::vector<float>(flat.begin() + 3, flat.begin() + 7));
  const std::vector<float> twos(4, 2.0f);
  store.upload_params_range(3, twos);
  store.upload_grads_range(n - 4, twos);  // the last elements, padding included
  std::vector<float> params(n), grads(n);
  store.download_params(params);
  store.download_grads(grads);
  for (size_t i = 0; i < n; ++i) {
    EXPECT_EQ(params[i], i >= 3 && i < 7 ? 2.0f : flat[i]) << i;
    EXPECT_EQ(grads[i], i >= n - 4 ? 2.0f : 0.0f) << i;
  }
  store.download_grads_range(n - 4, part);
  EXPECT_EQ(part, twos);
  EXPECT_THROW(store.download_grads_range(n - 3, part), Error);  // past the end
  EXPECT_THROW(store.upload_params_range(n + 1, {}), Error);
  ParamStore host;
  host.declare("w", {2}, true);
  host.allocate();
  EXPECT_THROW(host.download_grads_range(0, std::span<float>(part).first(1)), Error);  // host memory already
}

TEST(ParamStoreOnADevice, HostSpansAreRefusedNamingTheDevice) {
  GuardedHostMemory memory;
  ParamStore store = device_store(memory);
  try {
    (void)store.params();
    FAIL() << "params() gave host access to device memory";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cuda:0"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)store.grads(), Error);
}

// ZeRO-2 and 3 on a device keep only shards: the flat buffers go.
TEST(ParamStoreOnADevice, ReleasingTheFlatBuffersFreesTheirDeviceMemory) {
  GuardedHostMemory memory;
  ParamStore store = device_store(memory);
  ASSERT_EQ(memory.live_allocations(), 2u);
  store.release_flat_grads();
  EXPECT_EQ(memory.live_allocations(), 1u);
  EXPECT_TRUE(store.kernel_grads().empty());
  EXPECT_EQ(store.grad(0), nullptr);
  store.zero_grads();  // nothing left to zero, and no fault
  store.release_flat_params();
  EXPECT_EQ(memory.live_allocations(), 0u);
  EXPECT_TRUE(store.kernel_params().empty());
  EXPECT_TRUE(store.params_transient());
}

TEST(ParamStoreOnADevice, AHostReadThroughAViewFaults) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  GuardedHostMemory memory;
  ParamStore store = device_store(memory);
  EXPECT_DEATH(
      {
        volatile float x = *store.param(0);
        (void)x;
      },
      "");
}

TEST(ParamStoreOnADevice, TheCpuStoreIsUnchanged) {
  ParamStore store;
  store.declare("w", {4}, true);
  store.allocate();
  EXPECT_TRUE(store.on_host());
  std::vector<float> flat(store.flat_size(), 2.5f);
  store.upload_params(flat);
  EXPECT_EQ(store.params()[3], 2.5f);
  std::vector<float> back(store.flat_size());
  store.download_params(back);
  EXPECT_EQ(back, flat);
  GuardedHostMemory memory;
  EXPECT_THROW(store.set_device(Device{DeviceKind::Cuda, 0}, &memory), Error);  // after allocate()
  ParamStore fresh;
  EXPECT_THROW(fresh.set_device(Device{DeviceKind::Cuda, 0}), Error);  // no memory given
}

}  // namespace
}  // namespace meshtrain
