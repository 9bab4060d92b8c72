#pragma once
// DeviceCollectives through the host (device_collectives.hpp): a buffer in
// a device's memory is downloaded into host scratch, reduced or broadcast
// there by the process group's collectives (shm, TCP, MPI) and uploaded
// when waited for; the same sums in the same order as on the CPU, so the
// same bits. Every move waits for the device: a path for correctness
// (several ranks sharing one GPU, no NCCL, the host's roles), not speed.
// With no device (the CPU) the collectives run on the values themselves.
//
// The scratch is kept between steps (a strategy sends the same buckets
// every step), counted as communication memory, in the device's staging
// memory (page-locked on a GPU: DeviceAllocator::staging_memory). Calls and
// waits come from one thread.
#include <memory>
#include <vector>

#include "meshtrain/comm/device/device_collectives.hpp"
#include "meshtrain/comm/group/process_group.hpp"
#include "meshtrain/core/aligned_buffer.hpp"
#include "meshtrain/core/device_buffer.hpp"

namespace meshtrain::comm {

class HostStagedCollectives final : public DeviceCollectives {
 public:
  // `device`: where the buffers live, null for the host's memory. The
  // group must outlive this.
  HostStagedCollectives(ProcessGroup& group, DeviceAllocator* device,
                        AllReduceAlgorithm algorithm = AllReduceAlgorithm::Auto);
  ~HostStagedCollectives() override;

  int size() const override { return group_.size(); }
  int rank() const override { return group_.rank(); }
  DeviceWorkHandle all_reduce_async(Buffer data, ReduceKind op) override;
  DeviceWorkHandle reduce_scatter_async(Buffer data, Buffer output, ReduceKind op) override;
  DeviceWorkHandle all_gather_async(Buffer data) override;
  DeviceWorkHandle exchange_async(std::vector<DeviceSend> sends, std::vector<DeviceRecv> recvs) override;
  void broadcast(Buffer data, int root) override;

  using Scratch = std::unique_ptr<AlignedBuffer<float>>;

 private:
  friend class StagedWork;
  // Scratch of at least `bytes` from the pool, contents unspecified (a
  // work gives it back when waited for or dropped).
  Scratch take(size_t bytes);
  // A host copy of `data`'s bytes in scratch from the pool.
  Scratch download(ConstBuffer data);

  ProcessGroup& group_;
  DeviceAllocator* device_;
  DeviceAllocator& staging_;  // the scratch's memory
  AllReduceAlgorithm algorithm_;
  std::vector<Scratch> free_;  // scratch not lent to a work in flight
};

}  // namespace meshtrain::comm
