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
#include "meshtrain/comm/transport/shm/stream_copy.hpp"

namespace meshtrain::comm::shm {

// One posted send, progressed a chunk at a time. Offsets are in bytes.
struct PendingSend {
  int peer = -1;
  const char* data = nullptr;
  size_t bytes = 0;
  size_t offset = 0;  // bytes already copied into slots
  bool done = false;
};

struct PendingRecv {
  int peer = -1;
  char* data = nullptr;
  size_t bytes = 0;
  const Reduction* reduce = nullptr;
  size_t offset = 0;  // bytes already taken out of slots
  bool done = false;
};

class RingSender {
 public:
  RingSender(Segment& seg, int src, int dst)
      : control_(&seg.control(src, dst)), metas_(seg.metas(src, dst)), data_(seg.ring_data(src, dst)),
        slot_count_(seg.layout().slot_count), slot_bytes_(seg.layout().slot_bytes) {}

  // Copies the next chunk of `s` into a free slot and publishes it; false if
  // the ring is full. A 0-byte message still takes one (empty) slot.
  bool try_push(PendingSend& s) {
    if (head_ - cached_tail_ >= slot_count_) {
      cached_tail_ = control_->tail.load(std::memory_order_acquire);
      if (head_ - cached_tail_ >= slot_count_) return false;
    }
    const size_t slot = head_ % slot_count_;
    const size_t chunk = std::min(slot_bytes_, s.bytes - s.offset);
    metas_[slot] = SlotMeta{seq_, s.bytes, s.offset, chunk};
    if (chunk != 0) std::memcpy(data_ + slot * slot_bytes_, s.data + s.offset, chunk);
    control_->head.store(++head_, std::memory_order_release);
    s.offset += chunk;
    if (s.offset == s.bytes) {
      s.done = true;
      ++seq_;
    }
    return true;
  }

 private:
  RingControl* control_;
  SlotMeta* metas_;
  char* data_;
  uint64_t slot_count_;
  size_t slot_bytes_;
  uint64_t head_ = 0;         // == control_->head; only this side writes it
  uint64_t cached_tail_ = 0;  // last value read of control_->tail
  uint64_t seq_ = 0;          // sequence of the message being sent
};

enum class PopResult { Empty, Progress, LengthMismatch };

class RingReceiver {
 public:
  RingReceiver(Segment& seg, int src, int dst)
      : control_(&seg.control(src, dst)), metas_(seg.metas(src, dst)), data_(seg.ring_data(src, dst)),
        slot_count_(seg.layout().slot_count), slot_bytes_(seg.layout().slot_bytes) {}

  // Takes the next chunk for `r` (copying or reducing it into r.data) and
  // frees its slot. LengthMismatch: the sender's message has another length,
  // stored in *sent_bytes; the slot is left in place.
  PopResult try_pop(PendingRecv& r, uint64_t* sent_bytes) {
    if (tail_ == cached_head_) {
      cached_head_ = control_->head.load(std::memory_order_acquire);
      if (tail_ == cached_head_) return PopResult::Empty;
    }
    const size_t slot = tail_ % slot_count_;
    const SlotMeta meta = metas_[slot];
    if (meta.msg_bytes != r.bytes || meta.msg_seq != seq_ || meta.chunk_offset != r.offset ||
        meta.chunk_bytes > r.bytes - r.offset) {
      *sent_bytes = meta.msg_bytes;
      return PopResult::LengthMismatch;
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
    control_->tail.store(++tail_, std::memory_order_release);
    r.offset += meta.chunk_bytes;
    if (r.offset == r.bytes) {
      r.done = true;
      ++seq_;
    }
    return PopResult::Progress;
  }

 private:
  RingControl* control_;
  const SlotMeta* metas_;
  const char* data_;
  uint64_t slot_count_;
  size_t slot_bytes_;
  uint64_t tail_ = 0;         // == control_->tail; only this side writes it
  uint64_t cached_head_ = 0;  // last value read of control_->head
  uint64_t seq_ = 0;          // sequence of the message being received
};

}  // namespace meshtrain::comm::shm
