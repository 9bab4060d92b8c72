#pragma once
// One rank's view of the job's shared-memory segment: creating or opening
// it, checking that it belongs to this job, the join barrier, the job-wide
// abort, and typed access to the regions of segment_layout.hpp.
//
// Join protocol (bounded by the transport timeout):
//   1. rank 0 creates the name with O_EXCL (replacing a stale segment left by
//      a crashed job whose rank 0 is gone), sizes it, writes the Header and
//      stores state = ready; other ranks poll until the name exists and is
//      ready, then check magic, version, token hash and world size.
//   2. every rank claims its RankEntry (pid, start time), pre-faults the
//      slots of the rings it sends and receives on, and sets attached = 1.
//   3. every rank waits until all ranks are attached; then rank 0 unlinks the
//      name (the mappings stay valid), so no /dev/shm file outlives the job.
//   4. every rank probes whether it can read its peers' memory, publishes
//      the answer (RankEntry.single_copy; single_copy.hpp) and waits until
//      every rank has.
#include <chrono>
#include <cstddef>
#include <string>

#include "meshtrain/comm/transport/shm/segment_layout.hpp"
#include "meshtrain/comm/transport/shm/shm_transport.hpp"

namespace meshtrain::comm::shm {

class Segment {
 public:
  // Runs the join protocol above; throws CommError (ConfigError for options
  // that are malformed on their own).
  explicit Segment(const ShmOptions& options);
  ~Segment();
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;

  const Layout& layout() const { return layout_; }
  const std::string& name() const { return name_; }
  Header& header() { return *reinterpret_cast<Header*>(base_); }
  RankEntry& entry(int rank) {
    return reinterpret_cast<RankEntry*>(base_ + layout_.table_offset())[rank];
  }
  RingControl& control(int src, int dst) {
    return *reinterpret_cast<RingControl*>(control_base(src, dst));
  }
  SlotMeta* metas(int src, int dst) {
    return reinterpret_cast<SlotMeta*>(control_base(src, dst) + sizeof(RingControl));
  }
  // Payload of the ring src -> dst: slot_count slots of slot_bytes each.
  char* ring_data(int src, int dst) {
    return base_ + layout_.data_offset() + layout_.ring_index(src, dst) * layout_.ring_data_bytes();
  }

  // Records a job-wide fatal error (first caller wins) and throws it here.
  [[noreturn]] void abort_job(int rank, const std::string& reason);
  // Throws "job aborted by rank R: reason" if any rank has aborted the job.
  void check_abort();

 private:
  char* control_base(int src, int dst) {
    return base_ + layout_.control_offset() + layout_.ring_index(src, dst) * layout_.control_stride();
  }
  void create(const ShmOptions& options);
  void open_existing(const ShmOptions& options);
  void prefault(int rank);
  void register_rank(int rank);
  bool can_read_all_peers(int rank);
  // Polls until done(entry) holds for every rank; throws on the deadline,
  // naming the ranks missing and the step ("join", "finish joining").
  void wait_for_all(const ShmOptions& options, const char* step, bool (*done)(const RankEntry&));
  void release();  // unlink (if still ours) and unmap

  std::string name_;
  Layout layout_;
  char* base_ = nullptr;
  size_t bytes_ = 0;
  bool registered_ = false;  // this rank's RankEntry holds our pid
  bool linked_ = false;  // this rank created the name and has not unlinked it yet
  std::chrono::steady_clock::time_point deadline_;
};

// "0.3 s", "30 s": for error messages.
std::string format_seconds(std::chrono::milliseconds duration);

}  // namespace meshtrain::comm::shm
