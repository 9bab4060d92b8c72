#include "meshtrain/comm/nccl/nccl_groups.hpp"

#include <cstring>
#include <memory>
#include <vector>

#include "meshtrain/comm/device/device_collectives.hpp"
#include "meshtrain/comm/nccl/nccl_collectives.hpp"
#include "meshtrain/comm/nccl/nccl_library.hpp"
#include "meshtrain/core/error.hpp"

namespace meshtrain::comm::nccl {
namespace {

// A group's communicator and the compute stream its collectives follow;
// the parent it was split from (null for the parent itself) is destroyed
// after it.
class NcclEngine final : public DeviceEngine, public std::enable_shared_from_this<NcclEngine> {
 public:
  NcclEngine(std::shared_ptr<NcclCommunicator> communicator, cudaStream_t compute,
             std::shared_ptr<const NcclCommunicator> parent)
      : parent_(std::move(parent)), communicator_(std::move(communicator)), compute_(compute) {}
  std::unique_ptr<DeviceCollectives> collectives() override {
    return std::make_unique<NcclCollectives>(*communicator_, compute_, shared_from_this());
  }

 private:
  std::shared_ptr<const NcclCommunicator> parent_;  // declared first: destroyed last
  std::shared_ptr<NcclCommunicator> communicator_;
  cudaStream_t compute_;
};

// Worker 0's ncclGetUniqueId, broadcast over the host's group of all workers.
ncclUniqueId shared_unique_id(ProcessGroup& all) {
  constexpr size_t kWords = (sizeof(ncclUniqueId) + sizeof(int64_t) - 1) / sizeof(int64_t);
  std::vector<int64_t> words(kWords, 0);
  ncclUniqueId id{};
  if (all.rank() == 0) {
    const ncclResult_t status = nccl_library().GetUniqueId(&id);
    if (status != ncclSuccess)
      throw CommError("NCCL communicators: ncclGetUniqueId failed on worker 0: " + nccl_status_text(status));
    std::memcpy(words.data(), &id, sizeof id);
  }
  all.broadcast(std::span<int64_t>(words), 0);
  std::memcpy(&id, words.data(), sizeof id);
  return id;
}

std::vector<int> members_of(const ProcessGroup& group) {
  return std::vector<int>(group.members().begin(), group.members().end());
}

}  // namespace

void use_nccl(MeshGroups& groups, cudaStream_t compute, double timeout_s) {
  if (!groups.all) throw CommError("NCCL communicators: the mesh's groups were not cut");
  ProcessGroup& all = *groups.all;
  auto world = std::make_shared<NcclCommunicator>(shared_unique_id(all), all.rank(), members_of(all), "all",
                                                  timeout_s);
  // Each axis's group exists on every worker or on none, so every worker
  // makes the same splits in the same order, as ncclCommSplit requires.
  std::vector<ProcessGroup*> cut;
  for (const auto& group : groups.axis)
    if (group) cut.push_back(group.get());
  if (groups.expert_data) cut.push_back(groups.expert_data.get());
  for (ProcessGroup* group : cut) {
    auto child = std::make_shared<NcclCommunicator>(
        world->split(group->members().front(), group->rank(), members_of(*group), group->name()));
    group->use_device_engine(std::make_shared<NcclEngine>(std::move(child), compute, world));
  }
  // The tied embedding's pairs (the first and last pipeline stages of each
  // data and tensor coordinate) exist on some workers only; ncclCommSplit
  // wants every rank of the parent, so the others split with no color.
  int64_t pairs_anywhere = groups.embedding ? 1 : 0;
  all.all_reduce(std::span<int64_t>(&pairs_anywhere, 1), ReduceKind::Max);
  if (ProcessGroup* pair = groups.embedding.get()) {
    auto child = std::make_shared<NcclCommunicator>(
        world->split(pair->members().front(), pair->rank(), members_of(*pair), pair->name()));
    pair->use_device_engine(std::make_shared<NcclEngine>(std::move(child), compute, world));
  } else if (pairs_anywhere) {
    world->split_without_this_rank("embedding");
  }
  all.use_device_engine(std::make_shared<NcclEngine>(world, compute, nullptr));
}

}  // namespace meshtrain::comm::nccl
