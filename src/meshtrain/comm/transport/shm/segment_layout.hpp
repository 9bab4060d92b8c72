#pragma once
// The memory layout of one job's shared-memory segment, as every rank maps it.
//
// Terms used throughout shm/:
//   segment  one POSIX shared-memory object per job, /dev/shm/meshtrain-<job id>.
//   ring     a single-producer/single-consumer queue for one ordered pair of
//            ranks (src -> dst); there are W*(W-1) rings for world size W.
//   slot     one fixed-size staging buffer of a ring (slot_bytes, a multiple
//            of 4 KiB); a ring has slot_count of them, used round-robin.
//   chunk    the part of a message that one slot carries: up to slot_bytes.
//            Chunk k of a message starts at byte offset k * slot_bytes, so
//            chunk boundaries are aligned for every element type.
//   message  what one SendOp sends: ceil(bytes / slot_bytes) chunks, or one
//            empty chunk for a 0-byte message; or, for a large message to a
//            rank that can read this one's memory, a single descriptor slot
//            (single_copy.hpp): the receiver copies or reduces the bytes
//            straight out of the sender's buffer and frees the slot when done.
//   sequence the index of a message within its ring (0, 1, 2, ...); the
//            receiver checks it, so a lost or duplicated chunk cannot pass.
//   head     slots published by the producer so far (monotonic counter);
//   tail     slots freed by the consumer so far. Slot s % slot_count is
//            free for the producer when head - tail < slot_count and holds
//            data for the consumer when tail < head.
//
// Ordering: the producer fills a slot's payload and its SlotMeta with plain
// stores, then publishes with a release store of head; the consumer reads
// head with acquire, uses the slot, then frees it with a release store of
// tail. Only the producer writes head, only the consumer writes tail.
//
//   offset 0                 Header          (one page)
//   table_offset             RankEntry[W]    (64 bytes each, page-rounded)
//   control_offset           RingControl[R]  (R = W*(W-1) rings, each
//                                             followed by SlotMeta[slot_count])
//   data_offset              slot payloads: ring r, slot s at
//                            data_offset + (r * slot_count + s) * slot_bytes
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace meshtrain::comm::shm {

inline constexpr uint64_t kMagic = 0x4D45534853484D31ull;  // "MESHSHM1"
inline constexpr uint32_t kVersion = 2;
inline constexpr size_t kPageBytes = 4096;
inline constexpr size_t kCacheLine = 64;

// Header.state: rank 0 writes everything else first, then kReady (release).
inline constexpr uint32_t kStateReady = 1;

struct Header {
  uint64_t magic;
  uint32_t version;
  std::atomic<uint32_t> state;
  uint64_t token_hash;    // FNV-1a of the job token: a foreign job cannot join
  uint32_t world_size;
  uint32_t slot_count;    // slots per ring
  uint64_t slot_bytes;    // payload bytes per slot
  uint64_t total_bytes;   // size of the whole segment
  int32_t creator_pid;    // rank 0, to tell a stale segment from a live one
  uint64_t creator_start; // its start time (clock ticks since boot)
  // Job-wide abort: the first rank to see a fatal, job-wide error (a length
  // mismatch, a rank with the wrong world size) sets aborted = 1 + rank and
  // writes the reason; every rank checks it in every wait and throws it.
  std::atomic<uint32_t> aborted;
  std::atomic<uint32_t> reason_ready;
  char reason[512];
};
static_assert(sizeof(Header) <= kPageBytes);

// RankEntry.single_copy: whether this rank can read its peers' memory.
inline constexpr uint32_t kSingleCopyUnknown = 0;  // not probed yet (only seen during the join)
inline constexpr uint32_t kSingleCopyYes = 1;
inline constexpr uint32_t kSingleCopyNo = 2;

// One per rank. attached: it has mapped and pre-faulted the segment.
// closed: it has destroyed its transport. doorbell/sleeping: the futex
// protocol of waiter.hpp. probe_addr/single_copy: see single_copy.hpp.
struct alignas(kCacheLine) RankEntry {
  std::atomic<int32_t> pid;
  std::atomic<uint32_t> attached;
  std::atomic<uint32_t> closed;
  std::atomic<uint32_t> sleeping;
  std::atomic<uint32_t> doorbell;  // futex word: bumped by whoever wakes this rank
  std::atomic<uint32_t> single_copy;  // kSingleCopy*: set after the join barrier
  uint64_t start_time;             // process start time (ticks since boot)
  uint64_t probe_addr;             // address of this process's probe word
};
static_assert(sizeof(RankEntry) == kCacheLine);

struct alignas(kCacheLine) SlotMeta {
  uint64_t msg_seq;       // sequence of the message this chunk belongs to
  uint64_t msg_bytes;     // total bytes of that message
  uint64_t chunk_offset;  // byte offset of this chunk within the message
  uint64_t chunk_bytes;   // payload bytes in this slot (0 only for 0-byte messages)
  // Single-copy descriptor: the message's address in the sender's memory,
  // whose bytes stay there (chunk_offset 0, chunk_bytes = msg_bytes); 0 for
  // a chunk carried in the slot.
  uint64_t sender_addr;
};

// head and tail on separate cache lines so producer and consumer do not
// invalidate each other's line on every update.
struct RingControl {
  alignas(kCacheLine) std::atomic<uint64_t> head;
  alignas(kCacheLine) std::atomic<uint64_t> tail;
};
static_assert(sizeof(RingControl) == 2 * kCacheLine);

inline constexpr size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

// Byte offsets of every region for a given geometry.
struct Layout {
  uint32_t world_size = 0;
  uint32_t slot_count = 0;
  size_t slot_bytes = 0;

  size_t rings() const { return size_t(world_size) * (world_size - (world_size > 0)); }
  size_t control_stride() const { return sizeof(RingControl) + slot_count * sizeof(SlotMeta); }
  size_t table_offset() const { return kPageBytes; }
  size_t control_offset() const {
    return table_offset() + round_up(world_size * sizeof(RankEntry), kPageBytes);
  }
  size_t data_offset() const {
    return control_offset() + round_up(rings() * control_stride(), kPageBytes);
  }
  size_t ring_data_bytes() const { return slot_count * slot_bytes; }
  size_t total_bytes() const { return data_offset() + rings() * ring_data_bytes(); }

  // Ring index of the ordered pair src -> dst (src != dst), diagonal skipped.
  size_t ring_index(int src, int dst) const {
    return size_t(src) * (world_size - 1) + size_t(dst < src ? dst : dst - 1);
  }
};

}  // namespace meshtrain::comm::shm
