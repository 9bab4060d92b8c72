// MESHTRAIN_FAULT, a testing knob (fault_injection.hpp).
#include "meshtrain/comm/flight/fault_injection.hpp"

#include <cstdlib>
#include <mutex>
#include <string>

#include "meshtrain/comm/flight/flight_recorder.hpp"
#include "meshtrain/core/error.hpp"

namespace meshtrain::comm::flight {
namespace {

struct Armed {
  Fault kind = Fault::None;
  int64_t step = 0;
  std::string group;  // empty: any
  Op op = Op::None;   // None: any collective
  bool fired = false;
};
Armed g_armed;
std::mutex g_mutex;

[[noreturn]] void bad(const std::string& value, const std::string& why) {
  throw ConfigError("MESHTRAIN_FAULT=\"" + value + "\": " + why +
                    " (want KIND:rank=R:step=S[:group=NAME][:op=OP], KIND skip_collective, other_collective, "
                    "size_mismatch or flip_bit)");
}

}  // namespace

void arm_fault_from_environment(int rank) {
  const char* env = std::getenv("MESHTRAIN_FAULT");
  if (!env || !*env) return;
  const std::string value = env;
  Armed a;
  int fault_rank = -1;
  size_t at = 0;
  for (int field = 0; at <= value.size(); ++field) {
    size_t end = value.find(':', at);
    if (end == std::string::npos) end = value.size();
    const std::string part = value.substr(at, end - at);
    at = end + 1;
    if (field == 0) {
      if (part == "skip_collective") a.kind = Fault::Skip;
      else if (part == "other_collective") a.kind = Fault::OtherCollective;
      else if (part == "size_mismatch") a.kind = Fault::SizeMismatch;
      else if (part == "flip_bit") a.kind = Fault::FlipBit;
      else bad(value, "unknown kind '" + part + "'");
      continue;
    }
    const size_t eq = part.find('=');
    if (eq == std::string::npos) bad(value, "'" + part + "' is not NAME=VALUE");
    const std::string key = part.substr(0, eq), v = part.substr(eq + 1);
    if (key == "rank") {
      fault_rank = std::atoi(v.c_str());
    } else if (key == "step") {
      a.step = std::atoll(v.c_str());
    } else if (key == "group") {
      a.group = v;
    } else if (key == "op") {
      for (int o = 1; o < kOpCount; ++o)
        if (op_name(Op(o)) == v) a.op = Op(o);
      if (a.op == Op::None || is_point_to_point(a.op)) bad(value, "'" + v + "' is not a collective");
    } else {
      bad(value, "unknown field '" + key + "'");
    }
  }
  if (fault_rank < 0 || a.step < 1) bad(value, "rank and step (>= 1) are required");
  if (fault_rank != rank) return;
  g_armed = a;
  detail::fault_armed = true;
}

Fault take_fault(std::string_view group, Op op) {
  if (is_point_to_point(op)) return Fault::None;
  std::lock_guard lock(g_mutex);
  Armed& a = g_armed;
  if (a.fired || a.kind == Fault::FlipBit || current_step() != a.step || (!a.group.empty() && a.group != group) ||
      (a.op != Op::None && a.op != op))
    return Fault::None;
  a.fired = true;
  return a.kind;
}

bool take_flip_bit(int64_t step) {
  if (!fault_armed()) return false;
  std::lock_guard lock(g_mutex);
  Armed& a = g_armed;
  if (a.fired || a.kind != Fault::FlipBit || a.step != step) return false;
  a.fired = true;
  return true;
}

}  // namespace meshtrain::comm::flight
