// Which device collectives a strategy's group gets (parallel/device_collectives.hpp),
// with threads as ranks: a group carrying an engine (as NCCL's
// communicators are attached where every worker has a GPU of its own)
// serves the data-parallel gradient buckets through it, with the same sums;
// the Reduction Server's groups stay on the host; and on the CPU the job
// decides on the host's collectives without a message, while
// parallel.device_collectives = "nccl" is refused.
#include "meshtrain/parallel/device_collectives.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <vector>

#include "meshtrain/comm/device/host_staged_collectives.hpp"
#include "meshtrain/comm/transport/inproc/inproc_transport.hpp"
#include "meshtrain/core/error.hpp"
#include "meshtrain/parallel/data_parallel/gradient_sync.hpp"
#include "thread_ranks.hpp"

namespace meshtrain::parallel {
namespace {

// An engine whose collectives are the host's, counting what passes through.
class CountingEngine final : public comm::DeviceEngine {
 public:
  explicit CountingEngine(comm::ProcessGroup& group) : group_(group) {}
  std::unique_ptr<comm::DeviceCollectives> collectives() override {
    class Counted final : public comm::DeviceCollectives {
     public:
      Counted(comm::ProcessGroup& g, std::atomic<int>& calls) : host_(g, nullptr), calls_(calls) {}
      int size() const override { return host_.size(); }
      int rank() const override { return host_.rank(); }
      comm::DeviceWorkHandle all_reduce_async(comm::Buffer data, comm::ReduceKind op) override {
        ++calls_;
        return host_.all_reduce_async(data, op);
      }
      comm::DeviceWorkHandle reduce_scatter_async(comm::Buffer data, comm::Buffer out, comm::ReduceKind op) override {
        ++calls_;
        return host_.reduce_scatter_async(data, out, op);
      }
      comm::DeviceWorkHandle all_gather_async(comm::Buffer data) override {
        ++calls_;
        return host_.all_gather_async(data);
      }
      comm::DeviceWorkHandle exchange_async(std::vector<comm::DeviceSend> sends,
                                            std::vector<comm::DeviceRecv> recvs) override {
        ++calls_;
        return host_.exchange_async(std::move(sends), std::move(recvs));
      }
      void broadcast(comm::Buffer data, int root) override {
        ++calls_;
        host_.broadcast(data, root);
      }

     private:
      comm::HostStagedCollectives host_;
      std::atomic<int>& calls_;
    };
    return std::make_unique<Counted>(group_, calls);
  }
  std::atomic<int> calls{0};

 private:
  comm::ProcessGroup& group_;
};

ParamStore engine_store() {
  ParamStore s;
  for (int i = 0; i < 4; ++i) s.declare("w" + std::to_string(i), {int64_t(500 + 11 * i)}, true);
  s.allocate();
  return s;
}

TEST(DeviceCollectivesFor, AGroupsEngineCarriesTheGradientBucketsWithTheSameSums) {
  const int ranks = 2;
  std::vector<std::vector<float>> plain(ranks), engined(ranks);
  std::vector<int> calls(ranks);
  testing::on_inproc_ranks(ranks, [&](int r, comm::ProcessGroup& group) {
    for (bool with_engine : {false, true}) {
      auto engine = std::make_shared<CountingEngine>(group);
      group.use_device_engine(with_engine ? engine : nullptr);
      ParamStore store = engine_store();
      GradientSync sync(store, group, {.bucket_bytes = 4096, .first_bucket_bytes = 4096});
      sync.start_backward();
      auto grads = store.grads();
      for (size_t i = 0; i < grads.size(); ++i) grads[i] = float(r + 1) * 0.5f + float(i % 7) * 0.25f;
      for (size_t v = store.views().size(); v-- > 0;) store.grad_ready(v);
      sync.finish_backward();
      (with_engine ? engined : plain)[size_t(r)].assign(grads.begin(), grads.end());
      if (with_engine) calls[size_t(r)] = engine->calls.load();
    }
    group.use_device_engine(nullptr);
  });
  for (int r = 0; r < ranks; ++r) {
    EXPECT_EQ(engined[size_t(r)], plain[size_t(r)]) << "rank " << r;
    EXPECT_GT(calls[size_t(r)], 0) << "rank " << r << ": the buckets did not go through the engine";
  }
}

TEST(DeviceCollectivesFor, TheReductionServersGroupsStayOnTheHost) {
  testing::on_inproc_ranks(2, [&](int, comm::ProcessGroup& group) {
    group.use_device_engine(std::make_shared<CountingEngine>(group));
    ParamStore store = engine_store();
    auto staged = device_collectives_for(group, store, comm::AllReduceAlgorithm::ReductionServer);
    EXPECT_NE(dynamic_cast<comm::HostStagedCollectives*>(staged.get()), nullptr);
    auto engined = device_collectives_for(group, store, comm::AllReduceAlgorithm::Ring);
    EXPECT_EQ(dynamic_cast<comm::HostStagedCollectives*>(engined.get()), nullptr);
    group.use_device_engine(nullptr);
  });
}

TEST(UseDeviceCollectives, OnTheCpuTheHostsCollectivesServeAndNcclIsRefused) {
  auto transports = comm::make_inproc_transports(1);
  comm::MeshGroups groups = comm::mesh_groups(comm::DeviceMesh(comm::MeshShape{}, 1),
                                              std::make_shared<comm::Communicator>(std::move(transports[0])));
  for (Device device : {Device{}, Device{.kind = DeviceKind::GuardedCpu, .index = 0}}) {
    const comm::DeviceCollectivesChoice choice =
        use_device_collectives(groups, comm::DeviceCollectivesKind::Auto, device, 10);
    EXPECT_FALSE(choice.nccl);
    EXPECT_EQ(choice.why, "the workers are not on GPUs");
    EXPECT_EQ(groups.all->device_engine(), nullptr);
    EXPECT_THROW(use_device_collectives(groups, comm::DeviceCollectivesKind::Nccl, device, 10), ConfigError);
  }
}

}  // namespace
}  // namespace meshtrain::parallel
