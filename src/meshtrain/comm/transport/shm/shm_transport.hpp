#pragma once
// The shared-memory transport: the default and fastest path between the
// processes (or threads) of one job on one host.
//
// Each rank calls connect_shm() with the same job id, token and world size.
// Rank 0 creates the job's segment (see segment_layout.hpp), every rank maps
// it, pre-faults the rings it uses and waits until all ranks have attached;
// rank 0 then unlinks the name, so nothing is left in /dev/shm once the
// ranks exit, even if they crash afterwards. A byte costs one copy into a
// slot and one copy (or reduction) out of it; in an exchange that sends a
// peer single_copy_bytes or more, where that peer may read the sender's
// memory, only the receiver's copy (or reduction) straight out of the
// sender's buffer (single_copy.hpp).
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "meshtrain/comm/transport/transport.hpp"

namespace meshtrain::comm {

struct ShmOptions {
  std::string job_id;  // unique per job; [A-Za-z0-9._-], at most 200 chars
  std::string token;   // per-job secret; ranks with another token are refused
  int rank = 0;
  int world_size = 1;
  TransportOptions transport;  // timeout: the longest wait without progress
  // Ring geometry (rank 0's values are used by the whole job). Memory is
  // W*(W-1) * slot_count * slot_bytes, pre-faulted at connect (1 MiB per
  // ring by default: 56 MiB for 8 ranks). 64 KiB chunks pipeline well (a
  // receiver starts on chunk k while chunk k+1 is copied in) and keep the
  // synchronization per chunk (~0.2 us) under 5% of its copy time.
  size_t slot_bytes = 64 * 1024;  // a multiple of 4096
  size_t slot_count = 16;
  // The least one exchange must send a peer for its messages to go
  // single-copy (single_copy.hpp); each sender's own value applies to its
  // sends, and 0 turns single-copy off for this rank's sends and receives.
  // Measured (bench/RESULTS.md, run 7): with a core per rank the slots are
  // faster while an exchange stays in cache, and above ~16 MiB they lose
  // half their speed whenever the host is busy, where single-copy holds.
  // With more ranks than cores a peer is often off its core, which stalls
  // a slot ring but not a single-copy read: then the second value applies.
  size_t single_copy_bytes = size_t(16) << 20;
  size_t single_copy_bytes_shared_cores = size_t(1) << 20;
};

// Joins the job; blocks until every rank has attached or the timeout passes.
// Throws CommError on timeout, a token or world-size mismatch, a rank claimed
// twice, or a system call failure.
std::unique_ptr<Transport> connect_shm(const ShmOptions& options);

// "/meshtrain-<job id>": the shm_open name (a file under /dev/shm).
std::string shm_segment_name(std::string_view job_id);

}  // namespace meshtrain::comm
