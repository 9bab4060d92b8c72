#include "meshtrain/comm/flight/flight_recorder.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <vector>

#include "meshtrain/comm/bootstrap/launch_env.hpp"
#include "meshtrain/comm/flight/fault_injection.hpp"

namespace meshtrain::comm::flight {

std::string_view op_name(Op op) {
  switch (op) {
    case Op::None: return "none";
    case Op::AllReduce: return "all_reduce";
    case Op::ReduceScatter: return "reduce_scatter";
    case Op::AllGather: return "all_gather";
    case Op::Broadcast: return "broadcast";
    case Op::Reduce: return "reduce";
    case Op::AllToAll: return "all_to_all";
    case Op::AllToAllV: return "all_to_all_v";
    case Op::Barrier: return "barrier";
    case Op::Send: return "send";
    case Op::Recv: return "recv";
  }
  return "?";
}

std::string_view state_name(State s) {
  switch (s) {
    case State::Empty: return "empty";
    case State::Scheduled: return "scheduled";
    case State::Started: return "started";
    case State::Completed: return "completed";
    case State::Failed: return "failed";
  }
  return "?";
}

std::string_view phase_name(Phase p) {
  switch (p) {
    case Phase::Setup: return "setup";
    case Phase::Data: return "data";
    case Phase::Forward: return "forward";
    case Phase::Backward: return "backward";
    case Phase::Communication: return "communication";
    case Phase::Optimizer: return "optimizer";
    case Phase::Checkpoint: return "checkpoint";
    case Phase::Evaluation: return "evaluation";
  }
  return "?";
}

namespace {

// The open ring; null while none. Set once, before any group records (the
// training loop opens it before it connects to its peers), and never unmapped:
// a communication thread may still record while the process exits.
struct Ring {
  Header* header = nullptr;
  Record* records = nullptr;
  uint32_t capacity = 0;
  std::string path;
};
std::atomic<Ring*> g_ring{nullptr};
std::mutex g_groups_mutex;  // register_group (a few calls at start-up)

// The loop's step and phase, kept beside the ring's copy so that a fault
// (fault_injection.hpp) sees them without a ring.
std::atomic<int64_t> g_step{0};
std::atomic<uint8_t> g_phase{uint8_t(Phase::Setup)};

template <class T>
std::atomic_ref<T> shared(T& field) {
  return std::atomic_ref<T>(field);
}

uint64_t process_start_time() {
  std::ifstream f("/proc/self/stat");
  std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  // Field 22; the command name (field 2) may hold spaces: count after its ')'.
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(stat.substr(close + 2));
  std::string field;
  for (int i = 3; i <= 22 && rest >> field; ++i)
    if (i == 22) return std::strtoull(field.c_str(), nullptr, 10);
  return 0;
}

uint64_t fnv1a(std::span<const int> members) {
  uint64_t h = 14695981039346656037ull;
  for (int m : members) {
    for (int b = 0; b < 4; ++b) {
      h ^= (static_cast<uint32_t>(m) >> (8 * b)) & 0xff;
      h *= 1099511628211ull;
    }
  }
  return h;
}

void copy_text(char* out, size_t size, std::string_view text) {
  const size_t n = std::min(size - 1, text.size());
  std::memcpy(out, text.data(), n);
  out[n] = '\0';
}

struct CloseAtExit {
  ~CloseAtExit() { close_ring(); }
} g_close_at_exit;

}  // namespace

int64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

bool open_ring(const std::string& dir, int rank, int world, const std::string& job_id, uint32_t capacity) {
  if (g_ring.load(std::memory_order_acquire)) return true;
  const auto say = [&](const std::string& why) {
    std::fprintf(stderr, "flight recorder: warning: %s; this worker records no collectives\n", why.c_str());
    return false;
  };
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return say("cannot create " + dir + ": " + ec.message());
  const std::string path = dir + "/worker-" + std::to_string(rank) + ".ring";
  // Each writer holds an exclusive flock on its ring while it lives (the
  // kernel drops it with the process, SIGKILL included): a ring still held
  // is a running process's (another job on this run directory) and stays.
  if (const int old = ::open(path.c_str(), O_RDONLY | O_CLOEXEC); old >= 0) {
    const bool held = flock(old, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
    ::close(old);
    if (held) return say(path + " is held by a running process (another job on this run directory?)");
  }
  // Made whole under a temporary name, then renamed: a reader never sees a
  // ring without its header.
  const std::string temp = path + ".tmp" + std::to_string(getpid());
  const int fd = ::open(temp.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return say("cannot create " + temp + ": " + std::strerror(errno));
  const size_t bytes = kHeaderBytes + size_t(capacity) * sizeof(Record);
  void* map = MAP_FAILED;
  if (flock(fd, LOCK_EX | LOCK_NB) == 0 && ftruncate(fd, off_t(bytes)) == 0)
    map = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int err = errno;
  if (map == MAP_FAILED) {
    ::close(fd);
    unlink(temp.c_str());
    return say("cannot map " + temp + ": " + std::strerror(err));
  }
  // fd stays open, holding the lock, for the process's life.
  // Every page touched now, not at its first record: a first write to a
  // page of the file is a page fault (and a block allocation), a few
  // microseconds each inside a collective otherwise.
  std::memset(map, 0, bytes);
  auto* header = static_cast<Header*>(map);
  std::memcpy(header->magic, kMagic, sizeof kMagic);
  header->version = kVersion;
  header->header_bytes = kHeaderBytes;
  header->record_bytes = sizeof(Record);
  header->capacity = capacity;
  header->rank = rank;
  header->world = world;
  header->pid = int32_t(getpid());
  header->process_start = process_start_time();
  header->created_ns = now_ns();
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  copy_text(header->host, sizeof header->host, host);
  copy_text(header->job_id, sizeof header->job_id, job_id);
  header->step = g_step.load(std::memory_order_relaxed);
  header->phase = g_phase.load(std::memory_order_relaxed);
  header->phase_ns = header->created_ns;
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    munmap(map, bytes);
    ::close(fd);
    unlink(temp.c_str());
    return say("cannot rename " + temp + " to " + path + ": " + std::strerror(e));
  }
  auto* ring = new Ring{header, reinterpret_cast<Record*>(static_cast<char*>(map) + kHeaderBytes), capacity, path};
  g_ring.store(ring, std::memory_order_release);
  return true;
}

void open_worker_ring(const std::string& out_dir) {
  const LaunchEnv env = read_launch_env();
  if (env.world_size <= 1 || env.rank < 0) return;
  arm_fault_from_environment(env.rank);
  const char* off = std::getenv("MESHTRAIN_FLIGHT_RECORDER");
  if (off && std::string_view(off) == "0") return;  // off: to measure what it costs
  open_ring(out_dir + "/flight", env.rank, env.world_size, env.job_id);
}

void close_ring() {
  Ring* ring = g_ring.exchange(nullptr, std::memory_order_acq_rel);
  if (!ring) return;
  shared(ring->header->closed_ns).store(now_ns(), std::memory_order_relaxed);
  shared(ring->header->closed).store(1, std::memory_order_release);
  // The mapping stays: a communication thread may be inside a record still.
  // Kept reachable, so that it is not a leak to a leak checker (through a
  // pointer that no destructor clears: the ring is closed at exit too).
  static std::mutex mutex;
  static auto* closed = new std::vector<Ring*>;
  std::lock_guard lock(mutex);
  closed->push_back(ring);
}

bool recording() { return g_ring.load(std::memory_order_acquire) != nullptr; }

std::string ring_path() {
  const Ring* ring = g_ring.load(std::memory_order_acquire);
  return ring ? ring->path : std::string();
}

uint16_t register_group(std::string_view name, std::span<const int> members, int group_rank) {
  Ring* ring = g_ring.load(std::memory_order_acquire);
  if (!ring) return kNoGroup;
  std::lock_guard lock(g_groups_mutex);
  Header& h = *ring->header;
  const uint64_t hash = fnv1a(members);
  for (int32_t g = 0; g < h.group_count; ++g)
    if (h.groups[g].members_hash == hash && name == h.groups[g].name) return uint16_t(g);
  if (h.group_count >= int32_t(kMaxGroups)) return kNoGroup;
  GroupEntry& e = h.groups[h.group_count];
  copy_text(e.name, sizeof e.name, name);
  e.members_hash = hash;
  e.size = int32_t(members.size());
  e.rank = group_rank;
  for (size_t i = 0; i < members.size() && i < kMaxMembers; ++i) e.members[i] = members[i];
  shared(h.group_count).store(h.group_count + 1, std::memory_order_release);
  return uint16_t(h.group_count - 1);
}

Slot schedule(uint16_t group, std::span<const Entry> entries) {
  Ring* ring = g_ring.load(std::memory_order_acquire);
  if (!ring || entries.empty()) return {};
  const uint64_t first = shared(ring->header->write_index).fetch_add(entries.size(), std::memory_order_relaxed);
  const int64_t now = now_ns();
  const int64_t step = g_step.load(std::memory_order_relaxed);
  const uint8_t phase = g_phase.load(std::memory_order_relaxed);
  for (size_t i = 0; i < entries.size(); ++i) {
    const uint64_t index = first + i;
    Record& r = ring->records[index % ring->capacity];
    shared(r.stamp).store(0, std::memory_order_relaxed);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    r.seq = entries[i].seq;
    r.bytes = entries[i].bytes;
    r.step = step;
    r.scheduled_ns = now;
    r.started_ns = 0;
    r.ended_ns = 0;
    r.peer = entries[i].peer;
    r.group = group;
    r.op = uint8_t(entries[i].op);
    r.state = uint8_t(State::Scheduled);
    r.phase = phase;
    r.algorithm = entries[i].algorithm;
    shared(r.stamp).store(index + 1, std::memory_order_release);
  }
  return {first, uint32_t(entries.size())};
}

namespace {

void set_state(const Slot& slot, State state, bool start) {
  Ring* ring = g_ring.load(std::memory_order_acquire);
  if (!ring || !slot) return;
  const int64_t now = now_ns();
  for (uint64_t index = slot.first; index < slot.first + slot.count; ++index) {
    Record& r = ring->records[index % ring->capacity];
    // A ring that wrapped around since gave the slot to a newer record.
    if (shared(r.stamp).load(std::memory_order_relaxed) != index + 1) continue;
    (start ? r.started_ns : r.ended_ns) = now;
    shared(r.state).store(uint8_t(state), std::memory_order_release);
  }
}

}  // namespace

void started(const Slot& slot) { set_state(slot, State::Started, true); }

void finished(const Slot& slot, bool ok) { set_state(slot, ok ? State::Completed : State::Failed, false); }

void set_phase(int64_t step, Phase phase) {
  g_step.store(step, std::memory_order_relaxed);
  set_phase(phase);
}

void set_phase(Phase phase) {
  g_phase.store(uint8_t(phase), std::memory_order_relaxed);
  Ring* ring = g_ring.load(std::memory_order_acquire);
  if (!ring) return;
  Header& h = *ring->header;
  shared(h.step).store(g_step.load(std::memory_order_relaxed), std::memory_order_relaxed);
  shared(h.phase).store(uint32_t(phase), std::memory_order_relaxed);
  shared(h.phase_ns).store(now_ns(), std::memory_order_relaxed);
}

int64_t current_step() { return g_step.load(std::memory_order_relaxed); }

}  // namespace meshtrain::comm::flight
