#include "meshtrain/comm/flight/flight_reader.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "meshtrain/core/error.hpp"

namespace meshtrain::comm::flight {
namespace {

std::string text_field(const char* field, size_t size) { return std::string(field, strnlen(field, size)); }

// The state character and start time (fields 3 and 22) of /proc/<pid>/stat;
// false when there is no such process.
bool proc_stat(int pid, char& state, uint64_t& start) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  if (!f) return false;
  std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const size_t close = stat.rfind(')');
  if (close == std::string::npos || close + 2 >= stat.size()) return false;
  std::istringstream rest(stat.substr(close + 2));
  std::string field;
  start = 0;
  for (int i = 3; i <= 22 && rest >> field; ++i) {
    if (i == 3) state = field.empty() ? '?' : field[0];
    if (i == 22) start = std::strtoull(field.c_str(), nullptr, 10);
  }
  return true;
}

}  // namespace

RankRing read_ring(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error("cannot read flight ring " + path + ": " + std::strerror(errno));
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (bytes.size() < sizeof(Header)) throw Error(path + ": not a flight ring (too short)");
  Header h;
  std::memcpy(&h, bytes.data(), sizeof h);
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0) throw Error(path + ": not a flight ring (bad magic)");
  if (h.version != kVersion || h.header_bytes != kHeaderBytes || h.record_bytes != sizeof(Record))
    throw Error(path + ": flight ring version " + std::to_string(h.version) + " (this meshtrain reads " +
                std::to_string(kVersion) + ")");
  const size_t need = size_t(h.header_bytes) + size_t(h.capacity) * h.record_bytes;
  if (h.capacity == 0 || bytes.size() < need)
    throw Error(path + ": flight ring truncated (" + std::to_string(bytes.size()) + " of " + std::to_string(need) +
                " bytes)");
  RankRing ring;
  ring.path = path;
  ring.rank = h.rank;
  ring.world = h.world;
  ring.pid = h.pid;
  ring.process_start = h.process_start;
  ring.created_ns = h.created_ns;
  ring.host = text_field(h.host, sizeof h.host);
  ring.job_id = text_field(h.job_id, sizeof h.job_id);
  ring.write_index = h.write_index;
  ring.step = h.step;
  ring.phase = h.phase < uint32_t(kPhaseCount) ? Phase(h.phase) : Phase::Setup;
  ring.phase_ns = h.phase_ns;
  ring.closed = h.closed != 0;
  ring.closed_ns = h.closed_ns;
  const int groups = std::clamp(h.group_count, 0, int(kMaxGroups));
  for (int g = 0; g < groups; ++g) {
    const GroupEntry& e = h.groups[g];
    RingGroup out{text_field(e.name, sizeof e.name), e.members_hash, e.size, e.rank, {}};
    for (int m = 0; m < std::min(e.size, int(kMaxMembers)); ++m) out.members.push_back(e.members[m]);
    ring.groups.push_back(std::move(out));
  }
  const char* base = bytes.data() + h.header_bytes;
  for (uint32_t slot = 0; slot < h.capacity; ++slot) {
    Record r;
    std::memcpy(&r, base + size_t(slot) * sizeof(Record), sizeof r);
    if (r.stamp == 0 || (r.stamp - 1) % h.capacity != slot) continue;  // empty, half written or foreign
    RingRecord out;
    out.index = r.stamp - 1;
    out.seq = r.seq;
    out.bytes = r.bytes;
    out.step = r.step;
    out.scheduled_ns = r.scheduled_ns;
    out.started_ns = r.started_ns;
    out.ended_ns = r.ended_ns;
    out.peer = r.peer;
    out.group = r.group < groups ? int(r.group) : -1;
    out.op = r.op < kOpCount ? Op(r.op) : Op::None;
    out.state = r.state <= uint8_t(State::Failed) ? State(r.state) : State::Empty;
    out.phase = r.phase < kPhaseCount ? Phase(r.phase) : Phase::Setup;
    out.algorithm = r.algorithm;
    ring.records.push_back(out);
  }
  std::sort(ring.records.begin(), ring.records.end(),
            [](const RingRecord& a, const RingRecord& b) { return a.index < b.index; });
  return ring;
}

std::vector<RankRing> read_rings(const std::string& dir, std::vector<std::string>* notes) {
  namespace fs = std::filesystem;
  fs::path where = dir;
  if (fs::is_directory(where / "flight")) where /= "flight";
  std::error_code ec;
  std::vector<RankRing> rings;
  for (const auto& entry : fs::directory_iterator(where, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("worker-", 0) != 0 || entry.path().extension() != ".ring") continue;
    try {
      rings.push_back(read_ring(entry.path().string()));
    } catch (const Error& e) {
      if (notes) notes->push_back(std::string("left out: ") + e.what());
    }
  }
  if (ec) throw Error("cannot list " + where.string() + ": " + ec.message());
  if (rings.empty())
    throw Error("no flight recorder rings (worker-<rank>.ring) in " + where.string() +
                ": the job wrote none (a single process records nothing), or this is not its run directory");
  const auto newest = std::max_element(rings.begin(), rings.end(), [](const RankRing& a, const RankRing& b) {
    return a.created_ns < b.created_ns;
  });
  const std::string job = newest->job_id;
  std::vector<RankRing> mine;
  for (RankRing& r : rings) {
    if (r.job_id != job) {
      if (notes)
        notes->push_back("left out: " + r.path + " (job " + (r.job_id.empty() ? "?" : r.job_id) +
                         ", an earlier one than " + (job.empty() ? "?" : job) + ")");
      continue;
    }
    mine.push_back(std::move(r));
  }
  std::sort(mine.begin(), mine.end(), [](const RankRing& a, const RankRing& b) { return a.rank < b.rank; });
  return mine;
}

std::string_view liveness_name(Liveness l) {
  switch (l) {
    case Liveness::Unknown: return "unknown";
    case Liveness::Running: return "running";
    case Liveness::Stopped: return "stopped";
    case Liveness::Gone: return "gone";
  }
  return "?";
}

Liveness probe_liveness(const RankRing& ring) {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  if (ring.host != host || ring.pid <= 0) return Liveness::Unknown;
  char state = '?';
  uint64_t start = 0;
  if (!proc_stat(ring.pid, state, start)) return Liveness::Gone;
  if (ring.process_start != 0 && start != ring.process_start) return Liveness::Gone;  // the pid was reused
  if (state == 'Z' || state == 'X') return Liveness::Gone;
  if (state == 'T' || state == 't') return Liveness::Stopped;
  return Liveness::Running;
}

}  // namespace meshtrain::comm::flight
