#include "meshtrain/comm/transport/shm/segment.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

#include "meshtrain/comm/transport/shm/process.hpp"
#include "meshtrain/comm/transport/shm/single_copy.hpp"
#include "meshtrain/core/error.hpp"

namespace meshtrain::comm::shm {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kPollInterval = std::chrono::microseconds(200);

[[noreturn]] void throw_errno(const std::string& what) {
  throw CommError(what + ": " + std::strerror(errno));
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

void* map(int fd, size_t bytes, const std::string& name) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) throw_errno("mmap of shm segment " + name);
  return p;
}

// A segment with this name that no live rank 0 owns: left by a crashed job.
bool is_stale(const std::string& name) {
  int fd = ::shm_open(name.c_str(), O_RDONLY, 0);
  if (fd < 0) return errno == ENOENT;  // vanished meanwhile: also free
  struct stat st {};
  bool stale = true;  // smaller than a header: its creator died before sizing it
  if (::fstat(fd, &st) == 0 && size_t(st.st_size) >= kPageBytes) {
    void* p = ::mmap(nullptr, kPageBytes, PROT_READ, MAP_SHARED, fd, 0);
    if (p != MAP_FAILED) {
      const auto* h = static_cast<const Header*>(p);
      stale = h->state.load(std::memory_order_acquire) != kStateReady ||
              !process_alive(h->creator_pid, h->creator_start);
      ::munmap(p, kPageBytes);
    }
  }
  ::close(fd);
  return stale;
}

}  // namespace

std::string format_seconds(std::chrono::milliseconds d) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g s", double(d.count()) / 1000.0);
  return buf;
}

Segment::Segment(const ShmOptions& o) : name_(shm_segment_name(o.job_id)) {
  deadline_ = Clock::now() + o.transport.timeout;
  try {
    if (o.rank == 0) create(o); else open_existing(o);
    register_rank(o.rank);
    prefault(o.rank);
    entry(o.rank).attached.store(1, std::memory_order_release);
    wait_for_all(o, "join", [](const RankEntry& e) { return e.attached.load(std::memory_order_acquire) != 0; });
    if (linked_ && ::shm_unlink(name_.c_str()) == 0) linked_ = false;
    const bool single_copy = o.single_copy_bytes != 0 && can_read_all_peers(o.rank);
    entry(o.rank).single_copy.store(single_copy ? kSingleCopyYes : kSingleCopyNo, std::memory_order_release);
    // So that every rank's first message already knows which path it takes.
    wait_for_all(o, "finish joining", [](const RankEntry& e) {
      return e.single_copy.load(std::memory_order_acquire) != kSingleCopyUnknown;
    });
  } catch (...) {
    // Peers that saw this rank attach must not wait for it forever.
    if (registered_) entry(o.rank).closed.store(1, std::memory_order_release);
    release();
    throw;
  }
}

Segment::~Segment() { release(); }

void Segment::release() {
  if (linked_) ::shm_unlink(name_.c_str());
  linked_ = false;
  if (base_ != nullptr) ::munmap(base_, bytes_);
  base_ = nullptr;
}

void Segment::create(const ShmOptions& o) {
  layout_ = Layout{uint32_t(o.world_size), uint32_t(o.slot_count), o.slot_bytes};
  int fd = -1;
  while ((fd = ::shm_open(name_.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600)) < 0) {
    if (errno != EEXIST) throw_errno("rank 0 could not create shm segment " + name_);
    if (Clock::now() > deadline_ || !is_stale(name_)) {
      throw CommError("shm segment " + name_ + " belongs to a live job; job ids must be unique");
    }
    ::shm_unlink(name_.c_str());  // stale: replace it
  }
  linked_ = true;
  bytes_ = layout_.total_bytes();
  if (::ftruncate(fd, off_t(bytes_)) != 0) {
    int err = errno;
    ::close(fd);
    errno = err;
    throw_errno("rank 0 could not size shm segment " + name_ + " to " + std::to_string(bytes_) +
                " bytes");
  }
  base_ = static_cast<char*>(map(fd, bytes_, name_));
  ::close(fd);
  // ftruncate zero-filled everything; only the header needs values.
  Header& h = header();
  h.magic = kMagic;
  h.version = kVersion;
  h.token_hash = fnv1a(o.token);
  h.world_size = layout_.world_size;
  h.slot_count = layout_.slot_count;
  h.slot_bytes = layout_.slot_bytes;
  h.total_bytes = bytes_;
  h.creator_pid = ::getpid();
  h.creator_start = process_start_time(::getpid());
  h.state.store(kStateReady, std::memory_order_release);
}

void Segment::open_existing(const ShmOptions& o) {
  const std::string who = "rank " + std::to_string(o.rank);
  for (;; std::this_thread::sleep_for(kPollInterval)) {
    if (Clock::now() > deadline_) {
      throw CommError(who + " timed out after " + format_seconds(o.transport.timeout) +
                      " waiting for rank 0 to create shm segment " + name_);
    }
    int fd = ::shm_open(name_.c_str(), O_RDWR, 0);
    if (fd < 0) {
      if (errno == ENOENT) continue;
      throw_errno(who + " could not open shm segment " + name_);
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0 || size_t(st.st_size) < kPageBytes) { ::close(fd); continue; }
    auto* h = static_cast<Header*>(map(fd, kPageBytes, name_));
    if (h->state.load(std::memory_order_acquire) != kStateReady ||
        !process_alive(h->creator_pid, h->creator_start)) {
      ::munmap(h, kPageBytes);  // not ready yet, or stale (rank 0 will replace it)
      ::close(fd);
      continue;
    }
    const uint64_t magic = h->magic, token_hash = h->token_hash, total = h->total_bytes;
    const uint32_t version = h->version, world = h->world_size;
    layout_ = Layout{world, h->slot_count, size_t(h->slot_bytes)};
    ::munmap(h, kPageBytes);
    if (magic != kMagic || version != kVersion) {
      ::close(fd);
      throw CommError(who + ": " + name_ + " is not a meshtrain shm segment of version " +
                      std::to_string(kVersion));
    }
    if (token_hash != fnv1a(o.token)) {
      ::close(fd);
      throw CommError(who + ": token does not match the job's (shm segment " + name_ + ")");
    }
    if (total != layout_.total_bytes() || size_t(st.st_size) < total) {
      ::close(fd);
      throw CommError(who + ": shm segment " + name_ + " has an inconsistent size");
    }
    bytes_ = total;
    base_ = static_cast<char*>(map(fd, bytes_, name_));
    ::close(fd);
    if (world != uint32_t(o.world_size)) {
      abort_job(o.rank, who + " expected world size " + std::to_string(o.world_size) +
                            ", job has " + std::to_string(world));
    }
    return;
  }
}

void Segment::register_rank(int rank) {
  RankEntry& e = entry(rank);
  int32_t expected = 0;
  const int32_t me = ::getpid();
  if (!e.pid.compare_exchange_strong(expected, me)) {
    abort_job(rank, "rank " + std::to_string(rank) + " was claimed twice (pids " +
                        std::to_string(expected) + " and " + std::to_string(me) + ")");
  }
  e.start_time = process_start_time(me);
  e.probe_addr = probe_word_address();
  registered_ = true;
}

bool Segment::can_read_all_peers(int rank) {
  for (int peer = 0; peer < int(layout_.world_size); ++peer) {
    if (peer == rank) continue;
    RankEntry& e = entry(peer);  // written before its attached flag, which we have seen
    if (!can_read_peer(e.pid.load(std::memory_order_relaxed), e.probe_addr)) return false;
  }
  return true;
}

void Segment::prefault(int rank) {
  // Page faults cost ~12 us per 4 KiB page on the target VMs: fault in every
  // slot this rank will touch now, so steady-state transfers take none.
  const size_t ring_bytes = layout_.ring_data_bytes();
  for (int peer = 0; peer < int(layout_.world_size); ++peer) {
    if (peer == rank) continue;
    for (char* ring : {ring_data(rank, peer), ring_data(peer, rank)}) {
      if (::madvise(ring, ring_bytes, MADV_POPULATE_WRITE) == 0) continue;
      // Older kernels: write one byte per page (nothing is in flight before
      // the join barrier, and the slots are zero already).
      for (size_t off = 0; off < ring_bytes; off += kPageBytes) {
        reinterpret_cast<volatile char*>(ring)[off] = 0;
      }
    }
  }
}

void Segment::wait_for_all(const ShmOptions& o, const char* step, bool (*done)(const RankEntry&)) {
  for (;; std::this_thread::sleep_for(kPollInterval)) {
    check_abort();
    std::string missing;
    for (int r = 0; r < int(layout_.world_size); ++r) {
      if (!done(entry(r))) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    }
    if (missing.empty()) return;
    if (Clock::now() > deadline_) {
      throw CommError("rank " + std::to_string(o.rank) + " timed out after " +
                      format_seconds(o.transport.timeout) + " waiting for rank(s) " + missing + " to " + step +
                      " shm segment " + name_);
    }
  }
}

void Segment::abort_job(int rank, const std::string& reason) {
  Header& h = header();
  uint32_t none = 0;
  if (h.aborted.compare_exchange_strong(none, uint32_t(rank) + 1)) {
    std::snprintf(h.reason, sizeof(h.reason), "%s", reason.c_str());
    h.reason_ready.store(1, std::memory_order_release);
  }
  throw CommError(reason);
}

void Segment::check_abort() {
  Header& h = header();
  const uint32_t by = h.aborted.load(std::memory_order_acquire);
  if (by == 0) return;
  // The aborting rank writes the reason right after claiming the flag.
  const auto give_up = Clock::now() + std::chrono::milliseconds(100);
  while (h.reason_ready.load(std::memory_order_acquire) == 0 && Clock::now() < give_up) {
    std::this_thread::yield();
  }
  throw CommError("job aborted by rank " + std::to_string(by - 1) + ": " +
                  std::string(h.reason, ::strnlen(h.reason, sizeof(h.reason))));
}

}  // namespace meshtrain::comm::shm
