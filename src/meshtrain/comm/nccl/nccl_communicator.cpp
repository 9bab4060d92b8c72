#include "meshtrain/comm/nccl/nccl_communicator.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <thread>
#include <utility>

#include "meshtrain/comm/nccl/nccl_library.hpp"
#include "meshtrain/comm/nccl/unique_id.hpp"
#include "meshtrain/core/error.hpp"

namespace meshtrain::comm::nccl {
namespace {

ncclDataType_t nccl_type(DataType type) {
  switch (type) {
    case DataType::Fp32: return ncclFloat32;
    case DataType::Bf16: return ncclBfloat16;
    case DataType::Int32: return ncclInt32;
    case DataType::Int64: return ncclInt64;
  }
  return ncclFloat32;
}

ncclRedOp_t nccl_op(Reduction op) {
  switch (op) {
    case Reduction::Sum: return ncclSum;
    case Reduction::Avg: return ncclAvg;
    case Reduction::Max: return ncclMax;
    case Reduction::Min: return ncclMin;
  }
  return ncclSum;
}

// Runs one of NCCL's blocking joins (ncclCommInitRank, ncclCommSplit),
// which have no timeout: a peer that died or never came would leave this
// rank waiting for ever. Past parallel.timeout_s the process says which
// rank of which communicator was waiting and exits 1, as the operations'
// watchdog does; a join cannot be aborted from another thread (there is no
// communicator yet), and meshtrain run restarts the job.
ncclResult_t bounded_join(const std::string& name, int rank, int size, const std::string& what, double timeout_s,
                          const std::function<ncclResult_t()>& join) {
  const std::string who =
      "NCCL communicator '" + name + "': rank " + std::to_string(rank) + " of " + std::to_string(size);
  ncclResult_t status = ncclSuccess;
  run_watched(
      what, timeout_s,
      [who](const std::string& why) {
        std::fprintf(stderr, "meshtrain: error: %s: %s\n", who.c_str(), why.c_str());
        std::fflush(stderr);
        flight::close_ring();
        std::_Exit(1);
      },
      [&] { status = join(); });
  return status;
}

ncclComm_t init_rank(const ncclUniqueId& id, int rank, int size, const std::string& name, double timeout_s) {
  ncclComm_t comm = nullptr;
  const ncclResult_t status =
      bounded_join(name, rank, size, "joining (ncclCommInitRank)", timeout_s,
                   [&] { return nccl_library().CommInitRank(&comm, size, id, rank); });
  if (status != ncclSuccess) {
    const char* last = nccl_library().GetLastError(nullptr);
    throw CommError("NCCL communicator '" + name + "': rank " + std::to_string(rank) + " of " + std::to_string(size) +
                    " could not join (ncclCommInitRank): " + nccl_status_text(status) +
                    (last && *last ? std::string("; NCCL says: ") + last : std::string()) +
                    " (two ranks on one GPU are refused, and a small /dev/shm fails the join: docs/gpu.md)");
  }
  return comm;
}

}  // namespace

void check_cuda(cudaError_t status, const char* call, const std::string& where) {
  if (status != cudaSuccess)
    throw CommError(where + ": " + call + " failed: " + cudaGetErrorName(status) + ": " + cudaGetErrorString(status));
}

std::string nccl_status_text(ncclResult_t status) {
  static constexpr const char* kNames[] = {"ncclSuccess",         "ncclUnhandledCudaError", "ncclSystemError",
                                           "ncclInternalError",   "ncclInvalidArgument",    "ncclInvalidUsage",
                                           "ncclRemoteError",     "ncclInProgress"};
  const int i = static_cast<int>(status);
  const std::string name = i >= 0 && i < int(std::size(kNames)) ? kNames[i] : "ncclResult";
  return name + " (" + std::to_string(i) + "): " + nccl_library().GetErrorString(status);
}

size_t element_bytes(DataType type) {
  switch (type) {
    case DataType::Fp32: return 4;
    case DataType::Bf16: return 2;
    case DataType::Int32: return 4;
    case DataType::Int64: return 8;
  }
  return 4;
}

NcclCommunicator::NcclCommunicator(const ncclUniqueId& id, int rank, std::vector<int> members, std::string name,
                                   double timeout_s)
    : NcclCommunicator(init_rank(id, rank, int(members.size()), name, timeout_s), rank, std::move(members),
                       std::move(name), timeout_s) {}

NcclCommunicator::NcclCommunicator(ncclComm_t comm, int rank, std::vector<int> members, std::string name,
                                   double timeout_s)
    : comm_(comm), rank_(rank), size_(int(members.size())), members_(std::move(members)), name_(std::move(name)),
      timeout_s_(timeout_s) {
  const std::string where = "NCCL communicator '" + name_ + "' rank " + std::to_string(rank_);
  try {
    check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags", where);
    check_cuda(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming), "cudaEventCreateWithFlags", where);
    check_cuda(cudaGetDevice(&device_), "cudaGetDevice", where);
  } catch (...) {
    if (stream_) cudaStreamDestroy(stream_);
    nccl_library().CommDestroy(comm_);
    throw;
  }
  flight_group_ = flight::register_group("nccl:" + name_, members_, rank_);
}

NcclCommunicator NcclCommunicator::join(rendezvous::KeyValueStore& store, const std::string& key, int rank,
                                        std::vector<int> members, std::string name, double timeout_s) {
  const std::vector<unsigned char> bytes = share_unique_id(store, key, rank, sizeof(ncclUniqueId), [&] {
    ncclUniqueId id;
    const ncclResult_t status = nccl_library().GetUniqueId(&id);
    if (status != ncclSuccess)
      throw CommError("NCCL communicator '" + name + "': ncclGetUniqueId failed: " + nccl_status_text(status));
    const auto* raw = reinterpret_cast<const unsigned char*>(&id);
    return std::vector<unsigned char>(raw, raw + sizeof id);
  });
  ncclUniqueId id;
  std::memcpy(&id, bytes.data(), sizeof id);
  return NcclCommunicator(id, rank, std::move(members), std::move(name), timeout_s);
}

NcclCommunicator::NcclCommunicator(NcclCommunicator&& o) noexcept
    : comm_(std::exchange(o.comm_, nullptr)), rank_(o.rank_), size_(o.size_), members_(std::move(o.members_)),
      name_(std::move(o.name_)), timeout_s_(o.timeout_s_), stream_(std::exchange(o.stream_, nullptr)),
      event_(std::exchange(o.event_, nullptr)), device_(o.device_), watchdog_(std::move(o.watchdog_)),
      flight_group_(o.flight_group_), seq_(o.seq_), issued_(o.issued_),
      in_flight_(std::move(o.in_flight_)), last_operation_(std::move(o.last_operation_)) {}

NcclCommunicator::~NcclCommunicator() {
  watchdog_.reset();  // stops polling before the communicator goes
  if (comm_) end_communicator();
  if (event_) cudaEventDestroy(event_);
  if (stream_) cudaStreamDestroy(stream_);
}

bool NcclCommunicator::idle_within(double seconds) const {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  for (;;) {
    const cudaError_t status = cudaStreamQuery(stream_);
    if (status == cudaSuccess) return true;
    (void)cudaGetLastError();  // a pending stream's answer is not the next launch's error
    if (status != cudaErrorNotReady || std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

// ncclCommDestroy finalizes: it waits for the communicator's work and,
// within a node, for its peers. A communicator being unwound by an error,
// or whose work does not end within parallel.timeout_s, is aborted
// instead, so the error reaches the user and `meshtrain run` rather than a
// hang; a clean one that still cannot finish (a peer died after its last
// operation) ends the process past parallel.timeout_s, as a join does.
void NcclCommunicator::end_communicator() noexcept {
  try {
    if (std::uncaught_exceptions() == 0 && idle_within(timeout_s_)) {
      bounded_join(name_, rank_, size_, "destroying the communicator (ncclCommDestroy)", timeout_s_,
                   [comm = comm_] { return nccl_library().CommDestroy(comm); });
      return;
    }
  } catch (...) {  // no thread for the bound: abort below
  }
  nccl_library().CommAbort(comm_);
}

NcclCommunicator NcclCommunicator::split(int color, int key, std::vector<int> members, std::string name) const {
  ncclComm_t child = nullptr;
  check(bounded_join(name_, rank_, size_, "splitting off '" + name + "' (ncclCommSplit)", timeout_s_,
                     [&] { return nccl_library().CommSplit(comm_, color, key, &child, nullptr); }),
        "ncclCommSplit");
  int rank = 0;
  check(nccl_library().CommUserRank(child, &rank), "ncclCommUserRank");
  return NcclCommunicator(child, rank, std::move(members), std::move(name), timeout_s_);
}

void NcclCommunicator::split_without_this_rank(const std::string& name) const {
  ncclComm_t none = nullptr;
  check(bounded_join(name_, rank_, size_, "taking no part in splitting off '" + name + "' (ncclCommSplit)", timeout_s_,
                     [&] { return nccl_library().CommSplit(comm_, NCCL_SPLIT_NOCOLOR, 0, &none, nullptr); }),
        "ncclCommSplit");
  if (none) nccl_library().CommDestroy(none);  // NCCL gives no communicator for NCCL_SPLIT_NOCOLOR
}

void NcclCommunicator::check(ncclResult_t status, const char* operation) const {
  if (status == ncclSuccess || status == ncclInProgress) return;
  const char* last = comm_ ? nccl_library().GetLastError(comm_) : nullptr;
  throw CommError("NCCL communicator '" + name_ + "': rank " + std::to_string(rank_) + " of " +
                  std::to_string(size_) + ": " + operation + " failed: " + nccl_status_text(status) +
                  (last && *last ? std::string("; NCCL says: ") + last : std::string()));
}

void NcclCommunicator::after_compute(cudaStream_t compute) {
  const std::string where = "NCCL communicator '" + name_ + "'";
  check_cuda(cudaEventRecord(event_, compute), "cudaEventRecord", where);
  check_cuda(cudaStreamWaitEvent(stream_, event_, 0), "cudaStreamWaitEvent", where);
}

void NcclCommunicator::before_compute(cudaStream_t compute) {
  const std::string where = "NCCL communicator '" + name_ + "'";
  check_cuda(cudaEventRecord(event_, stream_), "cudaEventRecord", where);
  check_cuda(cudaStreamWaitEvent(compute, event_, 0), "cudaStreamWaitEvent", where);
}

void NcclCommunicator::record(flight::Op op, size_t bytes, int peer) {
  last_operation_ = std::string(flight::op_name(op)) + " #" + std::to_string(seq_) + " (" + std::to_string(bytes) +
                    " bytes" + (peer >= 0 ? ", peer " + std::to_string(peer) : "") + ")";
  const flight::Entry entry{.op = op, .peer = peer, .seq = seq_++, .bytes = bytes};
  const flight::Slot slot = flight::schedule(flight_group_, std::span(&entry, 1));
  flight::started(slot);
  if (slot) in_flight_.push_back(slot);  // no slot: no flight ring open (the watchdog still watches: issued_)
  issued_ = true;
}

void NcclCommunicator::all_reduce(void* data, size_t count, DataType type, Reduction op) {
  record(flight::Op::AllReduce, count * element_bytes(type));
  check(nccl_library().AllReduce(data, data, count, nccl_type(type), nccl_op(op), comm_, stream_), "ncclAllReduce");
}

void NcclCommunicator::all_gather(const void* send, void* recv, size_t count_per_rank, DataType type) {
  record(flight::Op::AllGather, count_per_rank * size_t(size_) * element_bytes(type));
  check(nccl_library().AllGather(send, recv, count_per_rank, nccl_type(type), comm_, stream_), "ncclAllGather");
}

void NcclCommunicator::reduce_scatter(const void* send, void* recv, size_t count_per_rank, DataType type,
                                      Reduction op) {
  record(flight::Op::ReduceScatter, count_per_rank * size_t(size_) * element_bytes(type));
  check(nccl_library().ReduceScatter(send, recv, count_per_rank, nccl_type(type), nccl_op(op), comm_, stream_),
        "ncclReduceScatter");
}

void NcclCommunicator::broadcast(void* data, size_t count, DataType type, int root) {
  record(flight::Op::Broadcast, count * element_bytes(type), root);
  check(nccl_library().Broadcast(data, data, count, nccl_type(type), root, comm_, stream_), "ncclBroadcast");
}

void NcclCommunicator::exchange(std::span<const Transfer> transfers, DataType type) {
  const ncclDataType_t t = nccl_type(type);
  check(nccl_library().GroupStart(), "ncclGroupStart");
  ncclResult_t status = ncclSuccess;
  const char* failed = nullptr;
  for (const Transfer& x : transfers) {
    if (x.send && x.send_count && status == ncclSuccess) {
      record(flight::Op::Send, x.send_count * element_bytes(type), x.peer);
      status = nccl_library().Send(x.send, x.send_count, t, x.peer, comm_, stream_);
      failed = "ncclSend";
    }
    if (x.recv && x.recv_count && status == ncclSuccess) {
      record(flight::Op::Recv, x.recv_count * element_bytes(type), x.peer);
      status = nccl_library().Recv(x.recv, x.recv_count, t, x.peer, comm_, stream_);
      failed = "ncclRecv";
    }
  }
  const ncclResult_t ended = nccl_library().GroupEnd();  // always closes the group, even after a failed call
  check(status, failed ? failed : "ncclSend/ncclRecv");
  check(ended, "ncclGroupEnd");
}

void NcclCommunicator::all_to_all_v(const void* send, std::span<const size_t> send_counts, void* recv,
                                    std::span<const size_t> recv_counts, DataType type) {
  if (send_counts.size() != size_t(size_) || recv_counts.size() != size_t(size_))
    throw Error("NcclCommunicator::all_to_all_v: counts for " + std::to_string(send_counts.size()) + " and " +
                std::to_string(recv_counts.size()) + " ranks, the communicator has " + std::to_string(size_));
  const size_t bytes = element_bytes(type);
  std::vector<Transfer> transfers(static_cast<size_t>(size_));
  size_t sent = 0, received = 0;
  for (int r = 0; r < size_; ++r) {
    transfers[size_t(r)] = {.peer = r,
                            .send = static_cast<const char*>(send) + sent * bytes,
                            .send_count = send_counts[size_t(r)],
                            .recv = static_cast<char*>(recv) + received * bytes,
                            .recv_count = recv_counts[size_t(r)]};
    sent += send_counts[size_t(r)];
    received += recv_counts[size_t(r)];
  }
  exchange(transfers, type);
}

void NcclCommunicator::abort_and_throw(const std::string& why) {
  watchdog_.reset();
  for (const flight::Slot& slot : in_flight_) flight::finished(slot, false);
  in_flight_.clear();
  nccl_library().CommAbort(comm_);  // frees it; the peers' operations fail rather than hang
  comm_ = nullptr;
  throw CommError("NCCL communicator '" + name_ + "': rank " + std::to_string(rank_) + " of " +
                  std::to_string(size_) + ": " + why + "; the communicator was aborted");
}

void NcclCommunicator::wait() {
  if (!comm_) throw CommError("NCCL communicator '" + name_ + "' was aborted by an earlier error");
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    const cudaError_t done = cudaStreamQuery(stream_);
    if (done == cudaSuccess) break;
    if (done != cudaErrorNotReady)
      abort_and_throw(last_operation_ + " failed on the device: " + cudaGetErrorName(done) + ": " +
                      cudaGetErrorString(done));
    ncclResult_t async = ncclSuccess;
    check(nccl_library().CommGetAsyncError(comm_, &async), "ncclCommGetAsyncError");
    if (async != ncclSuccess && async != ncclInProgress)
      abort_and_throw(last_operation_ + " failed: " + nccl_status_text(async));
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (waited > timeout_s_)
      abort_and_throw(last_operation_ + " did not finish within " + std::to_string(int(timeout_s_)) +
                      " s (parallel.timeout_s): a peer is dead, hung or never called it");
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  for (const flight::Slot& slot : in_flight_) flight::finished(slot, true);
  in_flight_.clear();
  issued_ = false;
}

void NcclCommunicator::watch_issued() {
  if (!comm_) throw CommError("NCCL communicator '" + name_ + "' was aborted by an earlier error");
  if (!issued_) return;
  issued_ = false;
  const std::string where = "NCCL communicator '" + name_ + "' rank " + std::to_string(rank_);
  if (!watchdog_) {
    // Everything the thread needs is copied: a communicator may move.
    const std::string who = "NCCL communicator '" + name_ + "': rank " + std::to_string(rank_) + " of " +
                            std::to_string(size_);
    watchdog_ = std::make_unique<DeviceWatchdog>(
        timeout_s_,
        [comm = comm_, who](const std::string& why) {
          nccl_library().CommAbort(comm);  // the peers' operations fail rather than hang
          std::fprintf(stderr, "meshtrain: error: %s: %s; the communicator was aborted\n", who.c_str(),
                       why.c_str());
          std::fflush(stderr);
          flight::close_ring();
          std::_Exit(1);
        },
        [device = device_] { cudaSetDevice(device); });
  }
  cudaEvent_t done = nullptr;
  check_cuda(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "cudaEventCreateWithFlags", where);
  check_cuda(cudaEventRecord(done, stream_), "cudaEventRecord", where);
  watchdog_->watch({.what = last_operation_,
                    .poll =
                        [done, comm = comm_] {
                          const cudaError_t status = cudaEventQuery(done);
                          if (status == cudaSuccess) return WatchedProgress{.done = true, .error = {}};
                          if (status != cudaErrorNotReady)
                            return WatchedProgress{.done = false, .error = std::string("on the device: ") +
                                                                          cudaGetErrorName(status) + ": " +
                                                                          cudaGetErrorString(status)};
                          ncclResult_t async = ncclSuccess;
                          nccl_library().CommGetAsyncError(comm, &async);
                          if (async != ncclSuccess && async != ncclInProgress)
                            return WatchedProgress{.done = false, .error = nccl_status_text(async)};
                          return WatchedProgress{.done = false, .error = {}};
                        },
                    .finished =
                        [done, slots = std::exchange(in_flight_, {})](bool ok) {
                          for (const flight::Slot& slot : slots) flight::finished(slot, ok);
                          cudaEventDestroy(done);
                        }});
}

}  // namespace meshtrain::comm::nccl
