#include "meshtrain/comm/nccl/nccl_collectives.hpp"

#include <algorithm>

#include "meshtrain/core/error.hpp"

namespace meshtrain::comm::nccl {
namespace {

constexpr const char* kWhere = "NCCL collectives";

// Seconds from event `from` to event `to` once both have happened, 0 if
// the device cannot say. Both are waited for first: cudaEventElapsedTime
// answers cudaErrorNotReady for an event still pending, and the runtime
// keeps that as the thread's last error, which the next kernel launch's
// check would then report as its own. A failure here is cleared for that
// reason: a report's timing must not fail the step.
double elapsed_seconds(cudaEvent_t from, cudaEvent_t to) {
  float ms = 0;
  if (cudaEventSynchronize(from) == cudaSuccess && cudaEventSynchronize(to) == cudaSuccess &&
      cudaEventElapsedTime(&ms, from, to) == cudaSuccess)
    return ms / 1000.0;
  (void)cudaGetLastError();
  return 0.0;
}

// A timed event on the compute stream: where a work's seconds_after counts from.
class NcclMark final : public DeviceMark {
 public:
  explicit NcclMark(cudaStream_t compute) {
    check_cuda(cudaEventCreate(&event_), "cudaEventCreate", kWhere);
    check_cuda(cudaEventRecord(event_, compute), "cudaEventRecord", kWhere);
  }
  ~NcclMark() override { cudaEventDestroy(event_); }
  cudaEvent_t event() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

// One operation on the communication stream, timed by two events there.
// Waiting for it is stream-ordered: the compute stream waits for its event
// and the host goes on; the communicator's watchdog turns a failure or a
// timeout into an error (nccl_communicator.hpp, watch_issued).
class NcclWork final : public DeviceWork {
 public:
  NcclWork(NcclCommunicator& communicator, cudaStream_t compute) : communicator_(communicator), compute_(compute) {
    check_cuda(cudaEventCreate(&start_), "cudaEventCreate", kWhere);
    check_cuda(cudaEventCreate(&end_), "cudaEventCreate", kWhere);
    check_cuda(cudaEventRecord(start_, communicator_.stream()), "cudaEventRecord", kWhere);
  }
  // A work dropped unwaited (a step left by an exception, handles reset)
  // still orders the compute stream after it: the buffers it reads and
  // writes are freed or reused in that stream's order.
  ~NcclWork() override {
    if (!waited_ && cudaStreamWaitEvent(compute_, end_, 0) != cudaSuccess)
      (void)cudaGetLastError();  // not the next kernel launch's error
    cudaEventDestroy(start_);
    cudaEventDestroy(end_);
  }
  // After the operation is enqueued.
  void mark_end() { check_cuda(cudaEventRecord(end_, communicator_.stream()), "cudaEventRecord", kWhere); }
  // The compute stream waits for this operation's end only, not for what
  // the communication stream took on after it (ZeRO-3's next prefetched
  // gather, later buckets), which would take the overlap away.
  void wait() override {
    check_cuda(cudaStreamWaitEvent(compute_, end_, 0), "cudaStreamWaitEvent", kWhere);
    waited_ = true;
  }
  // Waits on the host for the operation's end (only a caller that asks: the
  // overlap report's ledger, once a step, just before the step's norm waits
  // for the device anyway).
  double busy_seconds() const override {
    if (busy_s_ < 0) busy_s_ = elapsed_seconds(start_, end_);
    return busy_s_;
  }
  // The mark's event and the end event are on one device, so their
  // interval is the device's, across the two streams (negative: the work
  // ended before the mark).
  double seconds_after(const DeviceMark& mark) const override {
    const auto* nccl_mark = dynamic_cast<const NcclMark*>(&mark);
    return nccl_mark ? std::max(0.0, elapsed_seconds(nccl_mark->event(), end_)) : 0.0;
  }

 private:
  NcclCommunicator& communicator_;
  cudaStream_t compute_;
  cudaEvent_t start_ = nullptr, end_ = nullptr;
  bool waited_ = false;
  mutable double busy_s_ = -1;  // not yet known
};

}  // namespace

DataType nccl_data_type(comm::DataType type) {
  switch (type) {
    case comm::DataType::F32: return DataType::Fp32;
    case comm::DataType::BF16: return DataType::Bf16;
    case comm::DataType::I32: return DataType::Int32;
    case comm::DataType::I64: return DataType::Int64;
    default: throw CommError("NCCL collectives: only fp32, bf16, int32 and int64 tensors travel over NCCL here");
  }
}

Reduction nccl_reduction(ReduceKind op) {
  switch (op) {
    case ReduceKind::Sum: return Reduction::Sum;
    case ReduceKind::Avg: return Reduction::Avg;
    case ReduceKind::Max: return Reduction::Max;
    case ReduceKind::Min: return Reduction::Min;
  }
  throw CommError("NCCL collectives: an unknown reduction");
}

NcclCollectives::NcclCollectives(NcclCommunicator& communicator, cudaStream_t compute,
                                 std::shared_ptr<const void> owner)
    : communicator_(communicator), compute_(compute), owner_(std::move(owner)) {}

template <class Enqueue>
DeviceWorkHandle NcclCollectives::started(Enqueue&& enqueue) {
  communicator_.after_compute(compute_);
  auto work = std::make_unique<NcclWork>(communicator_, compute_);
  enqueue();
  work->mark_end();
  communicator_.watch_issued();
  return work;
}

DeviceWorkHandle NcclCollectives::all_reduce_async(Buffer data, ReduceKind op) {
  const DataType type = nccl_data_type(data.dtype);
  const Reduction reduction = nccl_reduction(op);
  return started([&] { communicator_.all_reduce(data.data, data.count, type, reduction); });
}

DeviceWorkHandle NcclCollectives::reduce_scatter_async(Buffer data, Buffer output, ReduceKind op) {
  if (data.dtype != output.dtype || data.count != output.count * size_t(size()))
    throw CommError("NCCL collectives: reduce_scatter of " + std::to_string(data.count) + " elements into " +
                    std::to_string(output.count) + " per rank over " + std::to_string(size()) + " ranks");
  const DataType type = nccl_data_type(data.dtype);
  const Reduction reduction = nccl_reduction(op);
  return started([&] { communicator_.reduce_scatter(data.data, output.data, output.count, type, reduction); });
}

DeviceWorkHandle NcclCollectives::all_gather_async(Buffer data) {
  const size_t segment = equal_segment(data, size(), "NCCL collectives");
  const DataType type = nccl_data_type(data.dtype);
  // In place, as NCCL allows: the send buffer is this rank's segment of the receive buffer.
  const void* mine = static_cast<const char*>(data.data) + segment * size_t(communicator_.rank()) * element_bytes(type);
  return started([&] { communicator_.all_gather(mine, data.data, segment, type); });
}

DeviceWorkHandle NcclCollectives::exchange_async(std::vector<DeviceSend> sends, std::vector<DeviceRecv> recvs) {
  const comm::DataType dtype = !sends.empty()   ? sends[0].data.dtype
                               : !recvs.empty() ? recvs[0].data.dtype
                                                : comm::DataType::F32;
  std::vector<Transfer> transfers;
  for (const DeviceSend& s : sends) {
    if (s.data.dtype != dtype) throw CommError("NCCL collectives: an exchange's sends and receives differ in type");
    transfers.push_back({.peer = s.peer, .send = s.data.data, .send_count = s.data.count});
  }
  for (const DeviceRecv& r : recvs) {
    if (r.data.dtype != dtype) throw CommError("NCCL collectives: an exchange's sends and receives differ in type");
    transfers.push_back({.peer = r.peer, .recv = r.data.data, .recv_count = r.data.count});
  }
  const DataType type = nccl_data_type(dtype);
  return started([&] { communicator_.exchange(transfers, type); });
}

std::shared_ptr<DeviceMark> NcclCollectives::mark_compute() { return std::make_shared<NcclMark>(compute_); }

void NcclCollectives::broadcast(Buffer data, int root) {
  communicator_.after_compute(compute_);
  communicator_.broadcast(data.data, data.count, nccl_data_type(data.dtype), root);
  communicator_.wait();
  communicator_.before_compute(compute_);
}

}  // namespace meshtrain::comm::nccl
