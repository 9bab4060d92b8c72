#pragma once
// The two ends of one SPSC ring (terms in segment_layout.hpp). A RingSender
// lives in the producer rank, a RingReceiver in the consumer rank; each keeps
// its own counter (head or tail) locally and a cached copy of the other
// side's, re-reading the shared one only when the cache says "full"/"empty",
// so a steady stream touches the other side's cache line once per slot.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "meshtrain/comm/reduce.hpp"
#include "meshtrain/comm/transport/shm/segment.hpp"
#include "meshtrain/comm/transport/shm/single_copy.hpp"
#include "meshtrain/comm/transport/shm/stream_copy.hpp"

namespace meshtrain::comm::shm {

// One posted send, progressed a chunk at a time. Offsets are in bytes.
struct PendingSend {
  int peer = -1;
  const char* data = nullptr;
  size_t bytes = 0;
  size_t offset = 0;  // bytes already copied into slots (all of them once a descriptor is out)
  bool single_copy = false;  // may go single-copy, if the receiver can read our memory
  // A single-copy descriptor is out: the receiver reads `data` in place, and
  // the send is done once it frees the descriptor's slot (tail reaches release_at).
  bool awaiting_release = false;
  uint64_t release_at = 0;
  bool done = false;
};

struct PendingRecv {
  int peer = -1;
  char* data = nullptr;
  size_t bytes = 0;
  const Reduction* reduce = nullptr;
  size_t offset = 0;  // bytes already taken out of slots (or read from the sender)
  bool done = false;
};

class RingSender {
 public:
  RingSender(Segment& seg, int src, int dst)
      : control_(&seg.control(src, dst)), metas_(seg.metas(src, dst)), data_(seg.ring_data(src, dst)),
        receiver_(&seg.entry(dst)), slot_count_(seg.layout().slot_count), slot_bytes_(seg.layout().slot_bytes) {}

  // Copies the next chunk of `s` into a free slot (or, for s.single_copy
  // when the receiver can read our memory, publishes a descriptor of all of
  // it); false if the ring is full. A 0-byte message still takes one
  // (empty) slot.
  bool try_push(PendingSend& s) {
    if (head_ - cached_tail_ >= slot_count_) {
      cached_tail_ = control_->tail.load(std::memory_order_acquire);
      if (head_ - cached_tail_ >= slot_count_) return false;
    }
    const size_t slot = head_ % slot_count_;
    if (s.offset == 0 && s.single_copy && receiver_reads_in_place()) {
      metas_[slot] = SlotMeta{seq_, s.bytes, 0, s.bytes, reinterpret_cast<uint64_t>(s.data)};
      control_->head.store(++head_, std::memory_order_release);
      s.offset = s.bytes;
      s.awaiting_release = true;
      s.release_at = head_;
      ++seq_;
      return true;
    }
    const size_t chunk = std::min(slot_bytes_, s.bytes - s.offset);
    metas_[slot] = SlotMeta{seq_, s.bytes, s.offset, chunk, 0};
    if (chunk != 0) std::memcpy(data_ + slot * slot_bytes_, s.data + s.offset, chunk);
    control_->head.store(++head_, std::memory_order_release);
    s.offset += chunk;
    if (s.offset == s.bytes) {
      s.done = true;
      ++seq_;
    }
    return true;
  }

  // For a send with a descriptor out: true (and done) once the receiver has
  // finished reading it, so the caller may reuse the buffer.
  bool try_release(PendingSend& s) {
    if (cached_tail_ < s.release_at) {
      cached_tail_ = control_->tail.load(std::memory_order_acquire);
      if (cached_tail_ < s.release_at) return false;
    }
    s.awaiting_release = false;
    s.done = true;
    return true;
  }

 private:
  bool receiver_reads_in_place() const {
    return receiver_->single_copy.load(std::memory_order_relaxed) == kSingleCopyYes;
  }

  RingControl* control_;
  SlotMeta* metas_;
  char* data_;
  const RankEntry* receiver_;
  uint64_t slot_count_;
  size_t slot_bytes_;
  uint64_t head_ = 0;         // == control_->head; only this side writes it
  uint64_t cached_tail_ = 0;  // last value read of control_->tail
  uint64_t seq_ = 0;          // sequence of the message being sent
};

enum class PopStatus {
  Empty,
  Progress,
  LengthMismatch,  // the sender's message has another length (sent_bytes)
  SenderGone,      // a single-copy read failed (read_error) or the sender closed meanwhile
};
struct PopResult {
  PopStatus status;
  uint64_t sent_bytes = 0;
  int read_error = 0;  // errno of the failed read; 0 if the sender closed its transport
};

class RingReceiver {
 public:
  // bounce: kSingleCopyPieceBytes of this rank's memory, for reductions of
  // single-copy messages (shared by all of a transport's receivers).
  RingReceiver(Segment& seg, int src, int dst, char* bounce)
      : control_(&seg.control(src, dst)), metas_(seg.metas(src, dst)), data_(seg.ring_data(src, dst)),
        sender_(&seg.entry(src)), bounce_(bounce), slot_count_(seg.layout().slot_count),
        slot_bytes_(seg.layout().slot_bytes) {}

  // Takes the next chunk for `r` (copying or reducing it into r.data) and
  // frees its slot; for a single-copy message, reads the next piece of it
  // from the sender and frees the slot after the last one. On
  // LengthMismatch the slot is left in place.
  PopResult try_pop(PendingRecv& r) {
    if (tail_ == cached_head_) {
      cached_head_ = control_->head.load(std::memory_order_acquire);
      if (tail_ == cached_head_) return {PopStatus::Empty};
    }
    const size_t slot = tail_ % slot_count_;
    const SlotMeta meta = metas_[slot];
    if (meta.msg_bytes != r.bytes || meta.msg_seq != seq_) return {PopStatus::LengthMismatch, meta.msg_bytes};
    if (meta.sender_addr != 0) return read_single_copy(r, meta);
    if (meta.chunk_offset != r.offset || meta.chunk_bytes > r.bytes - r.offset) {
      return {PopStatus::LengthMismatch, meta.msg_bytes};
    }
    const char* src = data_ + slot * slot_bytes_;
    if (meta.chunk_bytes != 0) {
      if (r.reduce != nullptr) {
        reduce_into(r.data + r.offset, src, meta.chunk_bytes, *r.reduce);
      } else if (r.bytes >= kStreamingCopyBytes) {
        stream_copy(r.data + r.offset, src, meta.chunk_bytes);
      } else {
        std::memcpy(r.data + r.offset, src, meta.chunk_bytes);
      }
    }
    r.offset += meta.chunk_bytes;
    free_slot(r);
    return {PopStatus::Progress};
  }

 private:
  PopResult read_single_copy(PendingRecv& r, const SlotMeta& meta) {
    if (meta.chunk_offset != 0 || meta.chunk_bytes != meta.msg_bytes) {
      return {PopStatus::LengthMismatch, meta.msg_bytes};  // a malformed descriptor
    }
    const pid_t pid = sender_->pid.load(std::memory_order_relaxed);
    const uint64_t from = meta.sender_addr + r.offset;
    const size_t piece = std::min(kSingleCopyPieceBytes, r.bytes - r.offset);
    int error = 0;
    if (r.reduce != nullptr) {
      error = read_peer(pid, from, bounce_, piece);
      if (error == 0) reduce_into(r.data + r.offset, bounce_, piece, *r.reduce);
    } else {
      // Straight into place: measured faster than bounce + streaming stores.
      error = read_peer(pid, from, r.data + r.offset, piece);
    }
    // A sender whose exchange failed marks itself closed before it lets go
    // of its buffers: if it has not, what we read was still its message.
    if (error != 0 || sender_->closed.load(std::memory_order_seq_cst) != 0) {
      return {PopStatus::SenderGone, 0, error};
    }
    r.offset += piece;
    if (r.offset == r.bytes) free_slot(r);
    return {PopStatus::Progress};
  }

  void free_slot(PendingRecv& r) {
    control_->tail.store(++tail_, std::memory_order_release);
    if (r.offset == r.bytes) {
      r.done = true;
      ++seq_;
    }
  }

  RingControl* control_;
  const SlotMeta* metas_;
  const char* data_;
  const RankEntry* sender_;
  char* bounce_;
  uint64_t slot_count_;
  size_t slot_bytes_;
  uint64_t tail_ = 0;         // == control_->tail; only this side writes it
  uint64_t cached_head_ = 0;  // last value read of control_->head
  uint64_t seq_ = 0;          // sequence of the message being received
};

}  // namespace meshtrain::comm::shm
