// The hang diagnosis's views and shared helpers (hang_analysis.hpp).
#include "meshtrain/comm/flight/hang_analysis.hpp"

#include <algorithm>
#include <cstdio>
#include <deque>
#include <map>
#include <set>
#include <tuple>

namespace meshtrain::comm::flight::detail {

Diagnosis Analysis::run() {
  Diagnosis d;
  if (views_.empty()) {
    d.finding = Finding::Unnamed;
    d.summary = "hang: cannot tell: no rings";
    return d;
  }
  std::vector<int> waiters;
  for (size_t i = 0; i < views_.size(); ++i)
    if (views_[i].blocked()) waiters.push_back(int(i));
  if (waiters.empty()) {
    d.finding = Finding::NoHang;
    d.summary = "no hang: no rank has waited in an operation for " + seconds(options_.min_wait_s) +
                " or more, and none failed in one";
    return d;
  }
  for (int w : waiters) d.details.push_back(waiting_line(views_[size_t(w)]));
  if (mismatch(d) || never_entered(waiters, d) || deviation(d) || frozen(d)) return d;
  d.finding = Finding::Unnamed;
  d.summary = "hang: no single culprit: " + describe_rank_list(waiters) +
              " wait, but every operation they wait in was entered by every member, no member's history "
              "deviates, and no process is stopped or killed";
  return d;
}

int Analysis::group_id(const RingGroup& g) {
  const auto key = std::make_pair(g.name, g.members_hash);
  auto it = group_ids_.find(key);
  if (it != group_ids_.end()) return it->second;
  groups_.push_back({g.name, g.members_hash, g.size, std::vector<int>(size_t(std::max(g.size, 0)), -1)});
  return group_ids_[key] = int(groups_.size() - 1);
}

void Analysis::fill_members(const View& v, int ring_group) {
  const RingGroup& rg = v.ring->groups[size_t(ring_group)];
  Group& g = groups_[size_t(v.group_of[size_t(ring_group)])];
  for (size_t m = 0; m < rg.members.size() && m < g.members.size(); ++m) g.members[m] = rg.members[m];
  if (rg.rank >= 0 && size_t(rg.rank) < g.members.size()) g.members[size_t(rg.rank)] = v.rank;
}

void Analysis::prepare(View& v, int index) {
  // Up to its first failure: what it scheduled after that happened on a
  // broken communicator (an operation scheduled before may fail after
  // others completed: those stay).
  const auto& recs = v.ring->records;
  int64_t failed_at = -1;
  for (const RingRecord& r : recs)
    if (r.state == State::Failed && (failed_at < 0 || r.ended_ns < failed_at)) failed_at = r.ended_ns;
  for (const RingRecord& r : recs)
    if (failed_at < 0 || r.scheduled_ns <= failed_at) v.records.push_back(&r);
  if (!recs.empty() && recs.front().index > 0) v.partial_step = recs.front().step;
  for (const RingRecord* r : v.records) {
    v.last_step = std::max(v.last_step, r->step);
    const int g = r->group >= 0 ? v.group_of[size_t(r->group)] : -1;
    if (r->state == State::Failed ||
        (r->state == State::Started && age_s(r->started_ns) >= options_.min_wait_s))
      v.waiting.push_back(r);
    if (training_phase(r->phase)) v.steps[r->step].push_back({g, r->op, r->bytes, r->peer});
    if (g < 0) continue;
    const bool entered = r->state >= State::Started;
    if (is_point_to_point(r->op)) {
      if (entered) {
        uint64_t& n = p2p_started_[{index, g, r->peer, int(r->op)}];
        n = std::max(n, r->seq);
      }
    } else {
      collectives_[{index, g}][r->seq] = r;
    }
  }
}

std::string Analysis::seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g s", s);
  return buf;
}

int Analysis::view_of(int rank) const {
  auto it = by_rank_.find(rank);
  return it == by_rank_.end() ? -1 : it->second;
}

std::string Analysis::group_text(int g) const {
  if (g < 0) return "an unregistered group";
  const Group& group = groups_[size_t(g)];
  std::string out = "group " + group.name + " [";
  for (size_t m = 0; m < group.members.size(); ++m) {
    if (m == 8 && group.members.size() > 9) {
      out += ", ... " + std::to_string(group.members.size() - 8) + " more";
      break;
    }
    out += (m ? ", " : "") + (group.members[m] < 0 ? std::string("?") : std::to_string(group.members[m]));
  }
  return out + "]";
}

std::string Analysis::op_text(const View& v, const RingRecord& r) const {
  std::string out(op_name(r.op));
  if (r.op == Op::Send) out += " to " + peer_text(v, r);
  if (r.op == Op::Recv) out += " from " + peer_text(v, r);
  if ((r.op == Op::Broadcast || r.op == Op::Reduce) && r.peer >= 0) out += " (root " + peer_text(v, r) + ")";
  return out + " of " + std::to_string(r.bytes) + " B";
}

std::string Analysis::peer_text(const View& v, const RingRecord& r) const {
  const int g = group_of(v, r);
  const int global = g >= 0 && r.peer >= 0 && size_t(r.peer) < groups_[size_t(g)].members.size()
                         ? groups_[size_t(g)].members[size_t(r.peer)]
                         : -1;
  return global >= 0 ? "rank " + std::to_string(global) : "group rank " + std::to_string(r.peer);
}

std::string Analysis::item_text(const Item& it) const {
  std::string out(op_name(it.op));
  if (is_point_to_point(it.op))
    out += std::string(it.op == Op::Send ? " to" : " from") + " group rank " + std::to_string(it.peer);
  return out + " of " + std::to_string(it.bytes) + " B of " + group_text(it.group);
}

std::string Analysis::where(const View& v) const {
  return "phase " + std::string(phase_name(v.ring->phase)) + " of step " + std::to_string(v.ring->step);
}

std::string Analysis::process_text(const View& v) const {
  if (v.ring->closed) return "its process exited";
  switch (v.live) {
    case Liveness::Stopped: return "its process is stopped";
    case Liveness::Gone: return "its process was killed";
    case Liveness::Running: return "its process is running";
    case Liveness::Unknown: return "";
  }
  return "";
}

std::string Analysis::describe_rank_list(const std::vector<int>& view_indices) const {
  std::vector<int> ranks;
  for (int i : view_indices) ranks.push_back(views_[size_t(i)].rank);
  return rank_list(ranks);
}

std::string Analysis::rank_list(std::vector<int> ranks) {
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i == 8 && ranks.size() > 9) return out + ", ... (" + std::to_string(ranks.size()) + " ranks)";
    out += (i ? ", " : "") + std::to_string(ranks[i]);
  }
  return out;
}

std::string Analysis::waiting_line(const View& v) const {
  const RingRecord& r = *v.waiting.front();
  return "rank " + std::to_string(v.rank) + (r.state == State::Failed ? " failed in " : " waits in ") +
         op_text(v, r) + " #" + std::to_string(r.seq) + " of " + group_text(group_of(v, r)) + " (step " +
         std::to_string(r.step) + ", " + std::string(phase_name(r.phase)) + ")" +
         (r.state == State::Failed ? "" : " for " + seconds(age_s(r.started_ns)));
}

bool Analysis::entered(int v, int g, uint64_t seq) const {
  auto it = collectives_.find({v, g});
  if (it == collectives_.end()) return false;
  auto at = it->second.lower_bound(seq);
  if (at == it->second.end()) return false;
  return at->first > seq || at->second->state >= State::Started;
}

bool Analysis::frozen(int v) const {
  const View& view = views_[size_t(v)];
  return view.live == Liveness::Stopped || (view.live == Liveness::Gone && !view.ring->closed);
}

std::vector<int> Analysis::frozen_members(int v) const {
  std::vector<int> out;
  const View& view = views_[size_t(v)];
  const RingRecord& r = *view.waiting.front();
  const int g = group_of(view, r);
  if (g < 0 || is_point_to_point(r.op)) return out;
  for (int m : groups_[size_t(g)].members) {
    const int mv = view_of(m);
    if (m == view.rank || mv < 0 || !frozen(mv)) continue;
    auto it = collectives_.find({mv, g});
    if (it == collectives_.end()) continue;
    auto at = it->second.find(r.seq);
    if (at != it->second.end() && at->second->state == State::Started) out.push_back(m);
  }
  return out;
}

bool Analysis::every_member_finished(int v, const RingRecord& r) const {
  const int g = group_of(views_[size_t(v)], r);
  if (g < 0 || is_point_to_point(r.op)) return false;
  for (int m : groups_[size_t(g)].members) {
    if (m == views_[size_t(v)].rank) continue;
    const int mv = view_of(m);
    if (mv < 0) return false;
    auto it = collectives_.find({mv, g});
    if (it == collectives_.end()) return false;
    auto at = it->second.lower_bound(r.seq);
    if (at == it->second.end() || (at->first == r.seq && at->second->state != State::Completed)) return false;
  }
  return true;
}

}  // namespace meshtrain::comm::flight::detail
