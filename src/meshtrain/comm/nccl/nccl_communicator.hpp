#pragma once
// One NCCL communicator (the device-collective engine of every GPU cluster)
// over device memory, its operations ordered on a communication stream of
// its own, so that gradient buckets travel while backward computes on the
// compute stream (after_compute / before_compute link the two by events).
//
// Creation: the ranks agree on a unique id through meshtrain's rendezvous
// store (unique_id.hpp), so torchrun, Slurm, Kubeflow and `meshtrain
// launch` all work as they do for the host's transports; each rank uses the
// CUDA device current when it joins (training.device: LOCAL_RANK's GPU).
// One communicator per process group of the mesh: split() cuts one
// communicator per color (ncclCommSplit), as comm/mesh cuts the groups.
//
// Errors: every NCCL status other than success becomes a CommError naming
// the communicator, this rank and the operation, with NCCL's own text and
// last error. wait() polls the stream and NCCL's asynchronous error and,
// past the timeout (parallel.timeout_s), aborts the communicator and throws
// naming the operation still in flight: a dead or hung peer ends the job
// with a message, never a hang. Each operation is recorded in the flight
// recorder (comm/flight/) as the host's collectives are.
//
// NCCL cannot put two ranks of one communicator on one GPU (NCCL <= 2.29:
// "Duplicate GPU detected"): several ranks sharing a GPU use the
// host-staged path (docs/gpu.md).
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "meshtrain/comm/device/device_watchdog.hpp"
#include "meshtrain/comm/flight/flight_recorder.hpp"
#include "meshtrain/comm/rendezvous/key_value_store.hpp"

namespace meshtrain::comm::nccl {

enum class DataType { Fp32, Bf16, Int32, Int64 };
enum class Reduction { Sum, Avg, Max, Min };

// A point-to-point part of an exchange: `count` elements to or from `peer`.
struct Transfer {
  int peer = 0;
  const void* send = nullptr;  // null: nothing sent to peer
  size_t send_count = 0;
  void* recv = nullptr;  // null: nothing received from peer
  size_t recv_count = 0;
};

class NcclCommunicator {
 public:
  // Joins the communicator `id` names as `rank` of members.size(), on the
  // current CUDA device, with a communication stream of its own. `name`
  // (the mesh axis: "data", "tensor", ...) appears in errors and, with
  // `members` (the job's worker ranks of its ranks, in order), in the
  // flight recorder.
  NcclCommunicator(const ncclUniqueId& id, int rank, std::vector<int> members, std::string name, double timeout_s);
  // As above, the id shared through `store` under `key` (rank 0 makes it).
  static NcclCommunicator join(rendezvous::KeyValueStore& store, const std::string& key, int rank,
                               std::vector<int> members, std::string name, double timeout_s);
  ~NcclCommunicator();
  NcclCommunicator(NcclCommunicator&& other) noexcept;
  NcclCommunicator& operator=(NcclCommunicator&&) = delete;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  // The ranks of one color form a communicator, ordered by key (every rank
  // calls it, as ncclCommSplit requires); `members`: its worker ranks.
  NcclCommunicator split(int color, int key, std::vector<int> members, std::string name) const;
  // This rank's part in a split that cuts groups it is not in
  // (NCCL_SPLIT_NOCOLOR): every rank of the parent must call ncclCommSplit.
  // `name`: the groups the others make.
  void split_without_this_rank(const std::string& name) const;

  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::string& name() const { return name_; }
  cudaStream_t stream() const { return stream_; }

  // The communication stream waits for what `compute` has issued so far
  // (a bucket's gradients are written) ...
  void after_compute(cudaStream_t compute);
  // ... and `compute` waits for what this stream has issued (the reduced
  // bucket is there before the optimizer reads it).
  void before_compute(cudaStream_t compute);

  // Stream-ordered operations on device memory (enqueued, not waited for).
  void all_reduce(void* data, size_t count, DataType type, Reduction op);
  void all_gather(const void* send, void* recv, size_t count_per_rank, DataType type);
  void reduce_scatter(const void* send, void* recv, size_t count_per_rank, DataType type, Reduction op);
  void broadcast(void* data, size_t count, DataType type, int root);
  // Grouped sends and receives (ncclGroupStart/End): a pipeline's
  // neighbour exchange, an all-to-all-v of routed tokens.
  void exchange(std::span<const Transfer> transfers, DataType type);
  // Every rank sends send_counts[d] elements to rank d from `send` in rank
  // order and receives recv_counts[s] from rank s into `recv`.
  void all_to_all_v(const void* send, std::span<const size_t> send_counts, void* recv,
                    std::span<const size_t> recv_counts, DataType type);

  // Waits until everything enqueued has finished, bounded by the timeout
  // (CommError after aborting the communicator).
  void wait();
  // Hands what was enqueued since the last wait() or watch_issued() to the
  // communicator's watchdog (device_watchdog.hpp, started on first use)
  // instead of waiting for it: it retires the operations as they finish
  // and, when one fails or runs past the timeout, aborts the communicator
  // (the peers' operations fail rather than hang), prints one error line
  // naming the communicator, rank and operation, and ends the process
  // with exit status 1 (a peer that died or timed out, docs/long-jobs.md):
  // no later host synchronisation can hang, and no step after it writes a
  // checkpoint.
  void watch_issued();

 private:
  NcclCommunicator(ncclComm_t comm, int rank, std::vector<int> members, std::string name, double timeout_s);
  void check(ncclResult_t status, const char* operation) const;
  // Records the operation in the flight recorder as started.
  void record(flight::Op op, size_t bytes, int peer = -1);
  [[noreturn]] void abort_and_throw(const std::string& why);
  // Whether the communication stream ran dry within `seconds`.
  bool idle_within(double seconds) const;
  // Destroys the communicator, or aborts it where that could hang (below).
  void end_communicator() noexcept;

  ncclComm_t comm_ = nullptr;
  int rank_ = 0, size_ = 0;
  std::vector<int> members_;
  std::string name_;
  double timeout_s_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t event_ = nullptr;
  int device_ = 0;  // the CUDA device it was joined on
  std::unique_ptr<DeviceWatchdog> watchdog_;
  uint16_t flight_group_;
  uint64_t seq_ = 0;
  bool issued_ = false;                  // enqueued since the last wait() or watch_issued()
  std::vector<flight::Slot> in_flight_;  // their flight-recorder entries (none without a ring)
  std::string last_operation_;           // for a timeout's message
};

// ncclResult_t as text: "ncclUnhandledCudaError (1): unhandled cuda error".
std::string nccl_status_text(ncclResult_t status);
// A CUDA call's failure as a CommError: "WHERE: CALL failed: NAME: TEXT".
void check_cuda(cudaError_t status, const char* call, const std::string& where);
size_t element_bytes(DataType type);

}  // namespace meshtrain::comm::nccl
