#pragma once
// A process group: some ranks of a Communicator's world, numbered 0 .. size-1
// in the order of `members` (their global ranks). Collectives on a group run
// on the shared communication thread over a GroupTransport that translates
// group ranks to global ranks.
//
// Every collective has a non-blocking form (name_async, returning a Work
// handle) and a blocking one (name, which waits). Arguments are checked when
// the call is made, and a bad one (a root or peer outside the group, buffer
// sizes that do not fit) throws CommError right there, without touching the
// communicator. Buffers must stay alive until the Work completes.
//
// Order: see communicator.hpp — all ranks of a group submit its collectives
// in the same order.
//
// Flight recorder: every operation is recorded where it is submitted
// (submit(), comm/flight/flight_recorder.hpp) with the group's name and the
// next sequence number of the group (collectives) or of the peer and
// direction (sends and receives), so that a hang can be traced to the rank
// that never entered an operation its peers wait in.
#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "meshtrain/comm/collectives/collectives.hpp"
#include "meshtrain/comm/flight/fault_injection.hpp"
#include "meshtrain/comm/flight/flight_recorder.hpp"
#include "meshtrain/comm/group/communicator.hpp"
#include "meshtrain/comm/group/work.hpp"
#include "meshtrain/comm/reduction_server/protocol.hpp"

namespace meshtrain::comm {

class DeviceEngine;  // comm/device/device_collectives.hpp

class ProcessGroup {
 public:
  // The whole world.
  explicit ProcessGroup(std::shared_ptr<Communicator> comm);
  // members: distinct global ranks in group-rank order; must include this
  // process's rank (comm->rank()). `name` is the group's in the flight
  // recorder ("data", "tensor", "pipeline", ...; at most 15 characters).
  ProcessGroup(std::shared_ptr<Communicator> comm, std::vector<int> members, std::string_view name = "group");

  int rank() const { return rank_; }
  int size() const { return int(members_->size()); }
  std::span<const int> members() const { return *members_; }
  int global_rank(int group_rank) const;
  Communicator& communicator() const { return *comm_; }
  const std::string& name() const { return name_; }
  // Bytes this rank has sent in the group's collectives so far (the
  // Reduction Server's traffic excepted): the measured communication volume.
  uint64_t bytes_sent() const { return bytes_sent_->load(std::memory_order_relaxed); }

  // Makes AllReduceAlgorithm::ReductionServer available: all-reduces of this
  // group then go through these reducer processes (global ranks outside the
  // group, running reduction_server::serve), in chunks of chunk_bytes with
  // in_flight chunks sent ahead of the sums back (reduction_server/protocol.hpp).
  void use_reducers(std::vector<int> reducer_ranks, size_t chunk_bytes = reduction_server::kDefaultChunkBytes,
                    int in_flight = 1);
  bool has_reducers() const { return reducers_ != nullptr; }
  // Tells the reducers this rank is done; call once at the end of a job.
  WorkHandle shutdown_reducers_async();

  // The engine the group's device collectives run on instead of being
  // staged through the host (its NCCL communicator; parallel/device_collectives.hpp).
  void use_device_engine(std::shared_ptr<DeviceEngine> engine) { device_engine_ = std::move(engine); }
  DeviceEngine* device_engine() const { return device_engine_.get(); }

  WorkHandle all_reduce_async(Buffer data, ReduceKind op = ReduceKind::Sum,
                              AllReduceAlgorithm algorithm = AllReduceAlgorithm::Auto);
  WorkHandle reduce_scatter_async(ConstBuffer input, Buffer output, ReduceKind op = ReduceKind::Sum);
  // data is the work area and is left clobbered (ZeRO's gradient staging).
  WorkHandle reduce_scatter_in_place_async(Buffer data, Buffer output, ReduceKind op = ReduceKind::Sum);
  WorkHandle all_gather_async(ConstBuffer input, Buffer output);
  WorkHandle broadcast_async(Buffer data, int root);
  WorkHandle reduce_async(Buffer data, int root, ReduceKind op = ReduceKind::Sum);
  WorkHandle all_to_all_async(ConstBuffer input, Buffer output);
  WorkHandle all_to_all_v_async(ConstBuffer input, std::vector<size_t> send_counts, Buffer output,
                                std::vector<size_t> recv_counts);
  WorkHandle barrier_async();
  WorkHandle send_async(ConstBuffer data, int peer);
  WorkHandle recv_async(Buffer data, int peer);
  // Point-to-point sends and receives (peers are group ranks) posted
  // together and progressed at once (Transport::exchange): two ranks that
  // send to each other in one exchange never wait on each other, as
  // pipeline schedules' paired sends and receives need.
  WorkHandle exchange_async(std::vector<SendOp> sends, std::vector<RecvOp> recvs);

  void all_reduce(Buffer data, ReduceKind op = ReduceKind::Sum,
                  AllReduceAlgorithm algorithm = AllReduceAlgorithm::Auto) {
    BlockingCall now(*this);
    all_reduce_async(data, op, algorithm)->wait();
  }
  void reduce_scatter(ConstBuffer input, Buffer output, ReduceKind op = ReduceKind::Sum) {
    BlockingCall now(*this);
    reduce_scatter_async(input, output, op)->wait();
  }
  void all_gather(ConstBuffer input, Buffer output) {
    BlockingCall now(*this);
    all_gather_async(input, output)->wait();
  }
  void broadcast(Buffer data, int root) {
    BlockingCall now(*this);
    broadcast_async(data, root)->wait();
  }
  void reduce(Buffer data, int root, ReduceKind op = ReduceKind::Sum) {
    BlockingCall now(*this);
    reduce_async(data, root, op)->wait();
  }
  void all_to_all(ConstBuffer input, Buffer output) {
    BlockingCall now(*this);
    all_to_all_async(input, output)->wait();
  }
  void all_to_all_v(ConstBuffer input, std::vector<size_t> send_counts, Buffer output,
                    std::vector<size_t> recv_counts) {
    BlockingCall now(*this);
    all_to_all_v_async(input, std::move(send_counts), output, std::move(recv_counts))->wait();
  }
  void barrier() {
    BlockingCall now(*this);
    barrier_async()->wait();
  }
  void send(ConstBuffer data, int peer) {
    BlockingCall now(*this);
    send_async(data, peer)->wait();
  }
  void recv(Buffer data, int peer) {
    BlockingCall now(*this);
    recv_async(data, peer)->wait();
  }
  void exchange(std::vector<SendOp> sends, std::vector<RecvOp> recvs) {
    BlockingCall now(*this);
    exchange_async(std::move(sends), std::move(recvs))->wait();
  }

 private:
  // `call` is the collective as the flight recorder sees it (its seq is
  // filled in here). `describe` builds the call's description, only when it
  // is needed. `op` is called as op(Transport&, const CollectiveOptions&); a
  // blocking call runs it by reference, an asynchronous one moves it into
  // the queue.
  template <class Op>
  WorkHandle submit(flight::Entry call, DescriptionRef describe, Op&& op);
  // Records `entries` (sequence numbers given) and runs op: submit()'s
  // second half, and the point-to-point operations' whole.
  template <class Op>
  WorkHandle dispatch(std::span<const flight::Entry> entries, flight::Fault fault, DescriptionRef describe, Op&& op);
  // The next point-to-point sequence number with `peer` (a group rank).
  uint64_t next_p2p(flight::Op op, int peer);
  void check_group_rank(const char* what, const char* role, int group_rank) const;

  // Set while a blocking call submits its operation: submit() then runs it
  // on the calling thread when the communicator is idle
  // (Communicator::run_blocking) instead of handing it to the thread.
  struct BlockingCall {
    explicit BlockingCall(ProcessGroup& g) : group(g) { group.blocking_ = true; }
    ~BlockingCall() { group.blocking_ = false; }
    ProcessGroup& group;
  };
  bool blocking_ = false;

  struct Reducers {
    std::vector<int> ranks;
    size_t chunk_bytes = 0;
    int in_flight = 1;
    uint64_t sequence = 0;  // all-reduces submitted; touched only by the submitting thread
  };

  std::shared_ptr<Communicator> comm_;
  std::shared_ptr<Reducers> reducers_;
  std::shared_ptr<DeviceEngine> device_engine_;
  std::shared_ptr<const std::vector<int>> members_;  // shared with queued operations
  std::shared_ptr<std::atomic<uint64_t>> bytes_sent_ = std::make_shared<std::atomic<uint64_t>>(0);
  int rank_ = -1;
  // The flight recorder's: the group's name and index in the ring, the
  // collectives submitted so far, and the sends to and receives from each
  // peer (touched only by the submitting thread).
  std::string name_;
  uint16_t flight_group_ = flight::kNoGroup;
  uint64_t collectives_ = 0;
  std::vector<uint64_t> sends_, recvs_;
};

}  // namespace meshtrain::comm
