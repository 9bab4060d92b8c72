#include "meshtrain/comm/transport/mpi/mpi_transport.hpp"

// The C API only: without these, mpi.h drags in the deprecated C++ bindings
// (and a link dependency on libmpi_cxx).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "meshtrain/core/error.hpp"

namespace meshtrain::comm {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kTag = 0;
constexpr size_t kStagingAlign = 64;

std::string rank_name(int rank) { return "rank " + std::to_string(rank); }

std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<size_t>(length));
}

// Set after any failed exchange: MPI_Finalize could then wait forever on
// messages a dead peer will never match.
std::atomic<bool> g_failed{false};

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && !g_failed.load()) MPI_Finalize();
}

void ensure_initialized() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  int provided = 0;
  if (initialized) {
    MPI_Query_thread(&provided);
  } else {
    const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
    if (rc != MPI_SUCCESS) throw CommError("transport mpi: MPI_Init_thread failed: " + mpi_error_text(rc));
    std::atexit(finalize_at_exit);  // we initialized it, so we finalize it
  }
  if (provided < MPI_THREAD_SERIALIZED)
    throw CommError("transport mpi: the MPI library offers thread level " + std::to_string(provided) +
                    ", below MPI_THREAD_SERIALIZED (the communication thread calls MPI)");
}

class MpiTransport final : public Transport {
 public:
  MpiTransport(MPI_Comm world, int rank, int size, TransportOptions options)
      : world_(world), rank_(rank), size_(size), options_(options) {}
  ~MpiTransport() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && broken_.empty()) MPI_Comm_free(&world_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string_view name() const override { return "mpi"; }

  void exchange(std::span<const SendOp> sends, std::span<const RecvOp> recvs) override {
    if (!broken_.empty())
      throw CommError(rank_name(rank_) + ": mpi transport is unusable after an earlier error: " + broken_);
    validate(sends, recvs);
    try {
      run(sends, recvs);
    } catch (const CommError& e) {
      broken_ = e.what();
      g_failed = true;
      cancel_pending_receives();  // they must not land in buffers the caller frees
      throw;
    }
  }

 private:
  void validate(std::span<const SendOp> sends, std::span<const RecvOp> recvs) const;
  void run(std::span<const SendOp> sends, std::span<const RecvOp> recvs);
  void check(int rc, const std::string& doing) const {
    if (rc != MPI_SUCCESS) throw CommError(rank_name(rank_) + ": " + doing + " failed: " + mpi_error_text(rc));
  }
  void finish_receive(const RecvOp& r, size_t staging_offset, const MPI_Status& status, int error);
  std::string pending_summary(std::span<const SendOp> sends, std::span<const RecvOp> recvs) const;
  void cancel_pending_receives();

  MPI_Comm world_;
  const int rank_, size_;
  const TransportOptions options_;
  std::string broken_;
  // Kept between exchanges to reuse their capacity. Requests: sends first,
  // then receives, in posted order.
  std::vector<unsigned char> staging_;
  std::vector<size_t> staging_offset_;  // per receive; reducing ones only
  std::vector<MPI_Request> requests_;
  std::vector<MPI_Status> statuses_;
  std::vector<int> completed_;
  size_t first_recv_ = 0;
};

void MpiTransport::validate(std::span<const SendOp> sends, std::span<const RecvOp> recvs) const {
  auto check_op = [&](int peer, const void* data, size_t bytes, const char* kind) {
    if (peer < 0 || peer >= size_)
      throw CommError(rank_name(rank_) + ": " + kind + " peer " + std::to_string(peer) + " is outside [0, " +
                      std::to_string(size_) + ")");
    if (peer == rank_) throw CommError(rank_name(rank_) + ": " + kind + " to itself");
    if (data == nullptr && bytes > 0) throw CommError(rank_name(rank_) + ": " + kind + " of a null buffer");
    if (bytes > size_t(INT_MAX))
      throw CommError(rank_name(rank_) + ": " + kind + " of " + std::to_string(bytes) +
                      " bytes exceeds the mpi transport's limit of INT_MAX bytes per message");
  };
  for (const SendOp& s : sends) check_op(s.peer, s.data, s.bytes, "send");
  for (const RecvOp& r : recvs) {
    check_op(r.peer, r.data, r.bytes, "receive");
    if (r.reduce && r.bytes % dtype_bytes(r.reduce->dtype) != 0)
      throw CommError(rank_name(rank_) + ": reducing receive of " + std::to_string(r.bytes) +
                      " bytes is not a whole number of " + std::string(dtype_name(r.reduce->dtype)));
  }
}

// Receives are posted before sends, so a peer's message usually finds its
// buffer waiting (no unexpected-message copy). MPI_Testsome rather than
// MPI_Testall: each reducing receive is folded in as soon as it lands, while
// later chunks are still in flight.
void MpiTransport::run(std::span<const SendOp> sends, std::span<const RecvOp> recvs) {
  const auto start = Clock::now();
  const auto deadline = start + options_.timeout;
  const size_t total = sends.size() + recvs.size();
  first_recv_ = sends.size();
  requests_.assign(total, MPI_REQUEST_NULL);
  statuses_.resize(total);
  completed_.resize(total);

  size_t staging_bytes = 0;
  staging_offset_.assign(recvs.size(), 0);
  for (size_t i = 0; i < recvs.size(); ++i) {
    if (!recvs[i].reduce) continue;
    staging_offset_[i] = staging_bytes;
    staging_bytes += (recvs[i].bytes + kStagingAlign - 1) / kStagingAlign * kStagingAlign;
  }
  if (staging_.size() < staging_bytes) staging_.resize(staging_bytes);  // grows once, then reused

  for (size_t i = 0; i < recvs.size(); ++i) {
    const RecvOp& r = recvs[i];
    void* dst = r.reduce ? staging_.data() + staging_offset_[i] : r.data;
    check(MPI_Irecv(dst, int(r.bytes), MPI_BYTE, r.peer, kTag, world_, &requests_[first_recv_ + i]),
          "posting a receive from " + rank_name(r.peer));
  }
  for (size_t i = 0; i < sends.size(); ++i) {
    const SendOp& s = sends[i];
    check(MPI_Isend(const_cast<void*>(s.data), int(s.bytes), MPI_BYTE, s.peer, kTag, world_, &requests_[i]),
          "posting a send to " + rank_name(s.peer));
  }

  size_t remaining = total;
  for (unsigned idle = 0; remaining > 0;) {
    int count = 0;
    const int rc = MPI_Testsome(int(total), requests_.data(), &count, completed_.data(), statuses_.data());
    if (rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS) check(rc, "MPI_Testsome");
    if (count == MPI_UNDEFINED) break;  // no active request left
    for (int k = 0; k < count; ++k) {
      const size_t index = size_t(completed_[size_t(k)]);
      const MPI_Status& status = statuses_[size_t(k)];
      if (index >= first_recv_) {
        // status.MPI_ERROR is set only when the call returned MPI_ERR_IN_STATUS
        const int error = rc == MPI_ERR_IN_STATUS ? status.MPI_ERROR : MPI_SUCCESS;
        finish_receive(recvs[index - first_recv_], staging_offset_[index - first_recv_], status, error);
      } else if (rc == MPI_ERR_IN_STATUS && status.MPI_ERROR != MPI_SUCCESS) {
        check(status.MPI_ERROR, "sending to " + rank_name(sends[index].peer));
      }
    }
    remaining -= size_t(count);
    if (count > 0) {
      idle = 0;
      continue;
    }
    // Nothing moved: MPI progresses only inside its calls, so keep polling,
    // yielding the core now and then (2 ranks may share one).
    if (++idle % 64 == 0) {
      std::this_thread::yield();
      if (Clock::now() > deadline)
        throw CommError(rank_name(rank_) + ": mpi exchange timed out after " +
                        std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count()) +
                        " ms; still pending: " + pending_summary(sends, recvs));
    }
  }
}

void MpiTransport::finish_receive(const RecvOp& r, size_t staging_offset, const MPI_Status& status, int error) {
  int error_class = MPI_SUCCESS;
  if (error != MPI_SUCCESS) MPI_Error_class(error, &error_class);
  if (error_class == MPI_ERR_TRUNCATE)
    throw CommError("message length mismatch: " + rank_name(r.peer) + " sent more than " + std::to_string(r.bytes) +
                    " bytes but " + rank_name(rank_) + " posted a receive of " + std::to_string(r.bytes) + " bytes");
  check(error, "receiving from " + rank_name(r.peer));
  int got = 0;
  check(MPI_Get_count(&status, MPI_BYTE, &got), "MPI_Get_count");
  if (size_t(got) != r.bytes)
    throw CommError("message length mismatch: " + rank_name(r.peer) + " sent " + std::to_string(got) + " bytes but " +
                    rank_name(rank_) + " posted a receive of " + std::to_string(r.bytes) + " bytes");
  if (r.reduce && r.bytes > 0) reduce_into(r.data, staging_.data() + staging_offset, r.bytes, *r.reduce);
}

std::string MpiTransport::pending_summary(std::span<const SendOp> sends, std::span<const RecvOp> recvs) const {
  std::string out;
  for (size_t i = 0; i < requests_.size(); ++i) {
    if (requests_[i] == MPI_REQUEST_NULL) continue;
    if (!out.empty()) out += ", ";
    out += i < first_recv_ ? "send to " + rank_name(sends[i].peer)
                           : "receive from " + rank_name(recvs[i - first_recv_].peer);
  }
  return out.empty() ? "nothing" : out;
}

void MpiTransport::cancel_pending_receives() {
  for (size_t i = first_recv_; i < requests_.size(); ++i) {
    if (requests_[i] == MPI_REQUEST_NULL) continue;
    MPI_Cancel(&requests_[i]);
    MPI_Request_free(&requests_[i]);
  }
}

}  // namespace

std::unique_ptr<Transport> connect_mpi(const MpiOptions& options) {
  ensure_initialized();
  MPI_Comm world = MPI_COMM_NULL;
  int rc = MPI_Comm_dup(MPI_COMM_WORLD, &world);
  if (rc != MPI_SUCCESS) throw CommError("transport mpi: MPI_Comm_dup failed: " + mpi_error_text(rc));
  MPI_Comm_set_errhandler(world, MPI_ERRORS_RETURN);
  int rank = 0, size = 0;
  MPI_Comm_rank(world, &rank);
  MPI_Comm_size(world, &size);
  if (rank != options.expected_rank || size != options.expected_world_size) {
    MPI_Comm_free(&world);
    throw CommError("transport mpi: MPI says rank " + std::to_string(rank) + " of " + std::to_string(size) +
                    " but the launch environment says rank " + std::to_string(options.expected_rank) + " of " +
                    std::to_string(options.expected_world_size) +
                    " (start the job with mpirun -np N, or pick another transport)");
  }
  return std::make_unique<MpiTransport>(world, rank, size, options.transport);
}

}  // namespace meshtrain::comm
