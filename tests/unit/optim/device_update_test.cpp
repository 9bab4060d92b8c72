// Every optimizer on a device: a store in cpu-guarded memory (the host
// cannot touch it outside a kernel, as on a GPU) updates through its
// backend to the CPU's bits: parameters, state and LARS's and LAMB's trust
// ratios, over the whole store and over a ZeRO-2 rank's segments (flat
// parameters, shard gradients), across chunk and view boundaries.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "meshtrain/core/device_array.hpp"
#include "meshtrain/core/flat_segment.hpp"
#include "meshtrain/core/param_store.hpp"
#include "meshtrain/core/rng.hpp"
#include "meshtrain/kernels/backend.hpp"
#include "meshtrain/optim/factory.hpp"
#include "meshtrain/optim/lamb.hpp"
#include "meshtrain/optim/lars.hpp"

namespace meshtrain {
namespace {

constexpr int kDeviceSteps = 3;
const Device kGuarded{DeviceKind::GuardedCpu, 0};

void declare_device_store(ParamStore& s, const Device& device) {
  if (!device.is_cpu()) s.set_device(device, &kernels::backend_for(device).allocator());
  s.declare("w", {4096 + 1000}, true);
  s.declare("b", {21}, false);
  s.declare("w2", {3, 700}, true);
  s.allocate();
}

struct Outcome {
  std::vector<float> init, params;
  std::map<std::string, std::vector<float>> state;
  std::vector<double> trust;
};

bool bits_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// kDeviceSteps updates on `device`: of the whole store (segments empty), or
// of `segments` with the gradients in the shard layout (ZeRO-2).
Outcome train_on(const Device& device, const OptimizerConfig& config, const FlatSegments& segments) {
  ParamStore s;
  declare_device_store(s, device);
  Rng rng(77);
  std::vector<float> init(s.flat_size());
  for (float& x : init) x = rng.normal();
  s.upload_params(init);
  std::unique_ptr<Optimizer> opt = segments.empty() ? make_optimizer(config, s) : make_optimizer(config, s, segments);
  DeviceArray<float> shard_grads(kernels::backend_for(device).allocator(), MemoryKind::Gradients);
  shard_grads.resize(opt->local_size());
  for (int k = 0; k < kDeviceSteps; ++k) {
    std::vector<float> grads(s.flat_size());
    for (float& x : grads) x = rng.normal() * (1.0f + 0.3f * float(k));
    const float lr = 0.01f * float(k + 1);
    if (segments.empty()) {
      if (s.on_host())
        std::memcpy(s.grads().data(), grads.data(), grads.size() * sizeof(float));
      else
        s.upload_grads_range(0, grads);
      opt->step(s, lr);
      continue;
    }
    std::vector<float> shard(opt->local_size());
    for (const FlatSegment& seg : segments)
      std::memcpy(&shard[seg.local], &grads[seg.begin], (seg.end - seg.begin) * sizeof(float));
    shard_grads.upload(shard);
    opt->update({.params = s.kernel_params().data(), .grads = shard_grads.raw(), .grads_in_shard = true}, lr);
  }
  Outcome out{init, std::vector<float>(s.flat_size()), {}, {}};
  s.download_params(out.params);
  for (auto& [name, buffer] : opt->state_buffers()) out.state[name] = buffer->to_host();
  if (auto* lamb = dynamic_cast<Lamb*>(opt.get())) out.trust = lamb->last_trust_ratios();
  if (auto* lars = dynamic_cast<Lars*>(opt.get())) out.trust = lars->last_trust_ratios();
  return out;
}

struct DeviceOptimizerCase {
  const char* name;
  OptimizerConfig config;
};

OptimizerConfig config_of(OptimizerKind kind, double momentum = 0, bool nesterov = false) {
  OptimizerConfig c;
  c.kind = kind;
  c.weight_decay = 0.01;
  c.momentum = momentum;
  c.nesterov = nesterov;
  c.trust_coefficient = 0.02;
  return c;
}

void PrintTo(const DeviceOptimizerCase& c, std::ostream* os) { *os << c.name; }

class DeviceOptimizer : public ::testing::TestWithParam<DeviceOptimizerCase> {};

TEST_P(DeviceOptimizer, UpdatesOnCpuGuardedWithTheCpusBits) {
  const OptimizerConfig& config = GetParam().config;
  // A ZeRO-2 rank's segments: a cut inside the first chunk of "w", then
  // from inside "w2" to the end.
  const FlatSegments shard{{.begin = 1000, .end = 4200, .local = 0}, {.begin = 5200, .end = 6500, .local = 3200}};
  for (const FlatSegments& segments : {FlatSegments{}, shard}) {
    SCOPED_TRACE(segments.empty() ? "whole store" : "ZeRO-2 segments");
    const Outcome cpu = train_on(Device{}, config, segments), guarded = train_on(kGuarded, config, segments);
    EXPECT_TRUE(bits_equal(cpu.params, guarded.params));
    ASSERT_EQ(cpu.state.size(), guarded.state.size());
    for (const auto& [name, values] : cpu.state) EXPECT_TRUE(bits_equal(values, guarded.state.at(name))) << name;
    EXPECT_EQ(cpu.trust, guarded.trust);
    // The steps moved the parameters (a no-op optimizer would pass the above).
    EXPECT_FALSE(bits_equal(cpu.params, cpu.init));
  }
}

INSTANTIATE_TEST_SUITE_P(
    All, DeviceOptimizer,
    ::testing::Values(DeviceOptimizerCase{"sgd", config_of(OptimizerKind::Sgd)},
                      DeviceOptimizerCase{"sgd_nesterov", config_of(OptimizerKind::Sgd, 0.9, true)},
                      DeviceOptimizerCase{"lars", config_of(OptimizerKind::Lars, 0.9)},
                      DeviceOptimizerCase{"lamb", config_of(OptimizerKind::Lamb)},
                      DeviceOptimizerCase{"adamw", config_of(OptimizerKind::AdamW)}),
    [](const ::testing::TestParamInfo<DeviceOptimizerCase>& info) { return std::string(info.param.name); });

// LARS and LAMB wait for the device once a step (their norms), SGD never.
TEST(DeviceOptimizerSyncs, LarsAndLambWaitOnceAStepSgdNever) {
  for (const auto& [kind, waits] : {std::pair{OptimizerKind::Sgd, 0}, std::pair{OptimizerKind::Lars, 1},
                                    std::pair{OptimizerKind::Lamb, 1}}) {
    ParamStore s;
    declare_device_store(s, kGuarded);
    auto opt = make_optimizer(config_of(kind, 0.9), s);
    const int64_t before = kernels::backend_for(kGuarded).host_syncs();
    opt->step(s, 0.1f);
    EXPECT_EQ(kernels::backend_for(kGuarded).host_syncs() - before, waits) << enum_string(kind);
  }
}

}  // namespace
}  // namespace meshtrain
