#pragma once
// DeviceCollectives over an NCCL communicator (device_collectives.hpp):
// each operation waits on the communication stream for the compute
// stream's work issued so far (an event), runs there, and its wait() makes
// the compute stream's later work wait for it (an event), with no host
// synchronisation: tensor parallelism's collectives, several per layer,
// never drain the compute stream. The communicator's watchdog
// (NcclCommunicator::watch_issued) bounds each operation by
// parallel.timeout_s, so a dead or hung peer ends the process with an
// error naming the operation rather than a copy of the loss that never
// returns. broadcast() (once per job) waits on the host.
#include <cuda_runtime_api.h>

#include <memory>

#include "meshtrain/comm/device/device_collectives.hpp"
#include "meshtrain/comm/nccl/nccl_communicator.hpp"

namespace meshtrain::comm::nccl {

class NcclCollectives final : public DeviceCollectives {
 public:
  // `compute`: the stream the kernels run on (CudaAllocator::stream()).
  // The communicator must outlive this; `owner`, when given, is kept
  // alive until this is destroyed (the communicator's owner).
  NcclCollectives(NcclCommunicator& communicator, cudaStream_t compute, std::shared_ptr<const void> owner = {});

  int size() const override { return communicator_.size(); }
  int rank() const override { return communicator_.rank(); }
  DeviceWorkHandle all_reduce_async(Buffer data, ReduceKind op) override;
  DeviceWorkHandle reduce_scatter_async(Buffer data, Buffer output, ReduceKind op) override;
  DeviceWorkHandle all_gather_async(Buffer data) override;
  DeviceWorkHandle exchange_async(std::vector<DeviceSend> sends, std::vector<DeviceRecv> recvs) override;
  void broadcast(Buffer data, int root) override;
  // A timed event on the compute stream (the overlap report's exposed time
  // comes from the device's events: waits here do not block the host).
  std::shared_ptr<DeviceMark> mark_compute() override;

 private:
  // Runs `enqueue` on the communication stream after the compute stream's work so far, timed.
  template <class Enqueue>
  DeviceWorkHandle started(Enqueue&& enqueue);

  NcclCommunicator& communicator_;
  cudaStream_t compute_;
  std::shared_ptr<const void> owner_;
};

// comm's element types and reductions as NCCL's (CommError for those NCCL lacks).
DataType nccl_data_type(comm::DataType type);
Reduction nccl_reduction(ReduceKind op);

}  // namespace meshtrain::comm::nccl
