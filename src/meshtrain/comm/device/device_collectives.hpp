#pragma once
// Collectives over values in a device's memory (docs/gpu.md, "Several
// workers on devices"): what a strategy calls to reduce or share tensors
// that its kernels wrote, whatever carries them. Two implementations:
//
// - host-staged (host_staged_collectives.hpp): the values go down to host
//   memory, through the process group's collectives (shm, TCP, MPI) and
//   back up; on the CPU the collectives run on the values themselves. It
//   serves every device, several ranks sharing one GPU, and machines
//   without NCCL.
// - NCCL (comm/nccl/nccl_collectives.hpp): on the communicator's own
//   stream, linked to the compute stream by events.
//
// A buffer's pointer is a kernel pointer (ParamStore::kernel_grads(), a
// backend's memory), never read by the host here. An operation is ordered
// after the device work issued before the call; its result is in place,
// ordered before the device work issued after its wait(). Every rank of the
// group calls the same operations in the same order.
#include <memory>
#include <string>
#include <vector>

#include "meshtrain/comm/collectives/buffer.hpp"
#include "meshtrain/comm/collectives/algorithm.hpp"
#include "meshtrain/core/error.hpp"

namespace meshtrain::comm {

// A point on the device's compute stream (DeviceCollectives::mark_compute),
// from which a work's end is measured on the device.
class DeviceMark {
 public:
  virtual ~DeviceMark() = default;
};

class DeviceWork {
 public:
  virtual ~DeviceWork() = default;
  // Returns when the result is ordered before the device's next work:
  // host-staged, it is back in the device's memory (CommError when the
  // operation failed or ran past the timeout); over NCCL the compute
  // stream waits for it and the host does not (the communicator's
  // watchdog ends the process when it fails or runs past the timeout).
  virtual void wait() = 0;
  // Seconds the transport spent on it, once waited for (the overlap report).
  virtual double busy_seconds() const = 0;
  // Seconds by which it ended on the device after `mark`, 0 if before:
  // what the compute stream waited for it. Only works whose collectives
  // give marks (mark_compute) answer; the host waits for the device here.
  virtual double seconds_after(const DeviceMark& mark) const { return 0; }
};
using DeviceWorkHandle = std::unique_ptr<DeviceWork>;

// The parts of an exchange: `data` to or from group rank `peer`.
struct DeviceSend {
  int peer = -1;
  ConstBuffer data;
};
struct DeviceRecv {
  int peer = -1;
  Buffer data;
};

class DeviceCollectives {
 public:
  virtual ~DeviceCollectives() = default;
  virtual int size() const = 0;
  // This rank's place in the group, 0 .. size() - 1.
  virtual int rank() const = 0;
  // Reduces `data` (fp32, bf16 or int32) over the group, in place, on every rank.
  virtual DeviceWorkHandle all_reduce_async(Buffer data, ReduceKind op) = 0;
  // Reduces `data` (size() equal segments, clobbered) over the group into
  // `output`: this rank's segment, output.count elements, anywhere in the
  // device's memory (its own segment of `data` included).
  virtual DeviceWorkHandle reduce_scatter_async(Buffer data, Buffer output, ReduceKind op) = 0;
  // Gathers `data` (size() equal segments) on every rank: each rank's
  // segment (group rank r's at r x data.count / size()) is its input, in
  // place, and every rank ends with all of them.
  virtual DeviceWorkHandle all_gather_async(Buffer data) = 0;
  // Posts `sends` and `recvs` together (grouped): two ranks that send to
  // each other in one exchange never wait on each other. A rank's sends to
  // a peer fill that peer's receives from it in order; each must match its
  // receive's count and type. All of one type (fp32 or bf16).
  virtual DeviceWorkHandle exchange_async(std::vector<DeviceSend> sends, std::vector<DeviceRecv> recvs) = 0;
  // Makes every rank's `data` equal to group rank `root`'s; waits.
  virtual void broadcast(Buffer data, int root) = 0;
  // A point on the compute stream now, for the works' seconds_after: where
  // waiting does not block the host (NCCL), how long communication held up
  // the compute is the device's to tell. Null where wait() blocks the host
  // (host-staged): its own waiting is that time.
  virtual std::shared_ptr<DeviceMark> mark_compute() { return nullptr; }
};

// Elements in each of `ranks` equal segments of `data` (an all-gather's);
// CommError naming `who` where the count does not split evenly.
inline size_t equal_segment(const Buffer& data, int ranks, const std::string& who) {
  if (ranks < 1 || data.count % size_t(ranks) != 0)
    throw CommError(who + ": all_gather of " + std::to_string(data.count) + " elements over " +
                    std::to_string(ranks) + " ranks: not equal segments");
  return data.count / size_t(ranks);
}

// What makes a process group's DeviceCollectives where something other
// than the host's collectives carries them: the group's NCCL communicator
// (comm/nccl/nccl_groups.hpp). A group without one is served host-staged.
class DeviceEngine {
 public:
  virtual ~DeviceEngine() = default;
  // Collectives on the engine; they keep it alive.
  virtual std::unique_ptr<DeviceCollectives> collectives() = 0;
};

}  // namespace meshtrain::comm
