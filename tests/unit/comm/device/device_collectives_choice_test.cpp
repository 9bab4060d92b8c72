// What carries a job's device collectives (device_collectives_choice.hpp):
// NCCL only where every worker has a GPU of its own and libnccl loads;
// "auto" falls back to the host-staged path saying why, "nccl" refuses
// naming the workers, "host_staged" never takes NCCL; and each worker's
// facts survive the trip through the all-gather's int64s.
#include "meshtrain/comm/device/device_collectives_choice.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "meshtrain/core/error.hpp"

namespace meshtrain::comm {
namespace {

WorkerGpu worker_on(unsigned char id, bool loads = true) {
  WorkerGpu g;
  g.nccl_loads = loads;
  for (size_t i = 0; i < g.uuid.size(); ++i) g.uuid[i] = static_cast<unsigned char>(id * 17 + i);
  return g;
}

std::string nccl_refusal(std::span<const WorkerGpu> workers) {
  try {
    choose_device_collectives(DeviceCollectivesKind::Nccl, workers);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

TEST(DeviceCollectivesChoice, TakesNcclWhenEveryWorkerHasAGpuOfItsOwn) {
  const std::vector<WorkerGpu> four{worker_on(0), worker_on(1), worker_on(2), worker_on(3)};
  for (auto kind : {DeviceCollectivesKind::Auto, DeviceCollectivesKind::Nccl}) {
    const DeviceCollectivesChoice choice = choose_device_collectives(kind, four);
    EXPECT_TRUE(choice.nccl);
    EXPECT_EQ(choice.why, "every one of the 4 workers has a GPU of its own");
  }
  const DeviceCollectivesChoice host = choose_device_collectives(DeviceCollectivesKind::HostStaged, four);
  EXPECT_FALSE(host.nccl);
  EXPECT_EQ(host.why, "parallel.device_collectives = \"host_staged\"");
}

TEST(DeviceCollectivesChoice, AutoStagesThroughTheHostWhenWorkersShareAGpu) {
  const std::vector<WorkerGpu> shared{worker_on(0), worker_on(1), worker_on(0), worker_on(1)};
  const DeviceCollectivesChoice choice = choose_device_collectives(DeviceCollectivesKind::Auto, shared);
  EXPECT_FALSE(choice.nccl);
  EXPECT_EQ(choice.why, "workers 0 and 2 share one GPU, and NCCL refuses two ranks of a communicator on one GPU");
  const std::string why = nccl_refusal(shared);
  EXPECT_NE(why.find("parallel.device_collectives = \"nccl\" cannot serve this job: workers 0 and 2 share one GPU"),
            std::string::npos)
      << why;
  EXPECT_NE(why.find("\"host_staged\""), std::string::npos) << why;
}

TEST(DeviceCollectivesChoice, AutoStagesThroughTheHostWhereNcclDoesNotLoad) {
  const std::vector<WorkerGpu> some{worker_on(0), worker_on(1, false), worker_on(2), worker_on(3, false)};
  const DeviceCollectivesChoice choice = choose_device_collectives(DeviceCollectivesKind::Auto, some);
  EXPECT_FALSE(choice.nccl);
  EXPECT_EQ(choice.why, "libnccl.so.2 does not load on workers 1, 3");
  const std::vector<WorkerGpu> one{worker_on(0), worker_on(0, false)};  // also shared: the missing library is named first
  EXPECT_EQ(choose_device_collectives(DeviceCollectivesKind::Auto, one).why,
            "libnccl.so.2 does not load on worker 1");
  EXPECT_NE(nccl_refusal(one).find("does not load on worker 1"), std::string::npos);
}

TEST(DeviceCollectivesChoice, AWorkersFactsSurviveTheAllGathersWords) {
  for (bool loads : {true, false}) {
    const WorkerGpu before = worker_on(200, loads);
    const auto words = encode(before);
    const WorkerGpu after = decode_worker_gpu(std::span<const int64_t, kWorkerGpuWords>(words));
    EXPECT_EQ(after.nccl_loads, loads);
    EXPECT_EQ(after.uuid, before.uuid);
  }
}

}  // namespace
}  // namespace meshtrain::comm
