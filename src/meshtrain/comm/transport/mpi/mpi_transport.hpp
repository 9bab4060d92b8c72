#pragma once
// The MPI transport: moves bytes through the MPI library the job was started
// with (mpirun / srun), so a cluster's tuned fabric (vader shared memory,
// UCX, verbs) carries the collectives that comm/collectives/ runs.
//
// Built only when CMake finds MPI (MESHTRAIN_HAVE_MPI).
//
// Terms:
//   world      MPI_COMM_WORLD duplicated once, with MPI_ERRORS_RETURN, so an
//              MPI failure becomes a CommError instead of an abort.
//   message    one SendOp or RecvOp = one MPI message of MPI_BYTE, tag 0.
//              MPI never overtakes messages of one (source, tag, comm), which
//              is exactly the transport's per-pair ordering rule.
//   staging    one buffer per transport, grown on demand and kept: a reducing
//              receive lands there and reduce_into() folds it into the
//              destination as soon as that message completes.
//
// Length check: a receive is posted for exactly its bytes. A shorter message
// shows in MPI_Get_count; a longer one is refused by MPI (MPI_ERR_TRUNCATE),
// and the CommError then says the sender sent more than was posted. Messages
// are limited to INT_MAX bytes (MPI counts are int).
//
// Lifetime: the first connect_mpi() calls MPI_Init_thread(MPI_THREAD_SERIALIZED)
// (one thread at a time calls MPI: the communication thread, after connect on
// the main thread) and registers MPI_Finalize to run at exit. After a failed
// exchange the transport refuses every later one; MPI_Finalize is then
// skipped, since it may wait forever on a dead peer's pending messages.
#include <memory>

#include "meshtrain/comm/transport/transport.hpp"

namespace meshtrain::comm {

struct MpiOptions {
  // The rank and size the launch environment announced; checked against
  // MPI's own (a mismatch means the process was not started by mpirun/srun).
  int expected_rank = 0;
  int expected_world_size = 1;
  TransportOptions transport;  // timeout: the longest wait without progress
};

// Initializes MPI if needed and returns this rank's transport. Throws
// CommError when MPI cannot give MPI_THREAD_SERIALIZED or when its rank or
// size differ from the expected ones.
std::unique_ptr<Transport> connect_mpi(const MpiOptions& options);

}  // namespace meshtrain::comm
