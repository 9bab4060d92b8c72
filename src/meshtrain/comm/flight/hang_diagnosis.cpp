// The hang diagnosis (hang_diagnosis.hpp): a pure function of the rings.
#include "meshtrain/comm/flight/hang_diagnosis.hpp"

#include <algorithm>
#include <cstdio>
#include <deque>
#include <map>
#include <set>
#include <tuple>

namespace meshtrain::comm::flight {

std::string_view finding_name(Finding f) {
  switch (f) {
    case Finding::NoHang: return "no hang";
    case Finding::Mismatch: return "mismatch";
    case Finding::NeverEntered: return "never entered";
    case Finding::Deviation: return "deviation";
    case Finding::Frozen: return "frozen";
    case Finding::Unnamed: return "unnamed";
  }
  return "?";
}

namespace {

constexpr int kHistorySteps = 16;  // earlier steps a step is compared with

bool training_phase(Phase p) {
  return p == Phase::Data || p == Phase::Forward || p == Phase::Backward || p == Phase::Communication ||
         p == Phase::Optimizer;
}

// One group as the rings together know it.
struct Group {
  std::string name;
  uint64_t hash = 0;
  int size = 0;
  std::vector<int> members;  // global rank per group rank; -1 where unknown
};

// One operation in a rank's history, as steps are compared.
struct Item {
  int group = -1;
  Op op = Op::None;
  uint64_t bytes = 0;
  int peer = -1;
  bool operator==(const Item& o) const {
    return group == o.group && op == o.op && peer == o.peer && (op == Op::AllToAllV || bytes == o.bytes);
  }
};

enum class History { Unknown, Consistent, Deviant };

// One rank as the diagnosis sees it.
struct View {
  const RankRing* ring = nullptr;
  int rank = -1;
  Liveness live = Liveness::Unknown;
  std::vector<const RingRecord*> records;  // its history up to its first failure
  std::vector<int> group_of;               // the ring's group index -> Group
  std::vector<const RingRecord*> waiting;  // started long enough ago and unfinished, or failed
  std::map<int64_t, std::vector<Item>> steps;  // training-phase operations per step
  int64_t last_step = 0;                   // the highest step of any record
  int64_t partial_step = -1;               // the oldest step, cut by the ring's wrap-around
  bool blocked() const { return !waiting.empty(); }
};

class Analysis {
 public:
  Analysis(const std::vector<RankRing>& rings, const std::vector<Liveness>& liveness, const DiagnosisOptions& o)
      : options_(o) {
    for (size_t i = 0; i < rings.size(); ++i) {
      View v;
      v.ring = &rings[i];
      v.rank = rings[i].rank;
      v.live = i < liveness.size() ? liveness[i] : Liveness::Unknown;
      for (const RingGroup& g : rings[i].groups) v.group_of.push_back(group_id(g));
      views_.push_back(std::move(v));
    }
    for (size_t i = 0; i < views_.size(); ++i) {
      by_rank_[views_[i].rank] = int(i);
      prepare(views_[i], int(i));
    }
    for (size_t i = 0; i < views_.size(); ++i)
      for (size_t g = 0; g < views_[i].ring->groups.size(); ++g) fill_members(views_[i], int(g));
  }

  Diagnosis run() {
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

 private:
  // ---- preparation ------------------------------------------------------
  int group_id(const RingGroup& g) {
    const auto key = std::make_pair(g.name, g.members_hash);
    auto it = group_ids_.find(key);
    if (it != group_ids_.end()) return it->second;
    groups_.push_back({g.name, g.members_hash, g.size, std::vector<int>(size_t(std::max(g.size, 0)), -1)});
    return group_ids_[key] = int(groups_.size() - 1);
  }

  void fill_members(const View& v, int ring_group) {
    const RingGroup& rg = v.ring->groups[size_t(ring_group)];
    Group& g = groups_[size_t(v.group_of[size_t(ring_group)])];
    for (size_t m = 0; m < rg.members.size() && m < g.members.size(); ++m) g.members[m] = rg.members[m];
    if (rg.rank >= 0 && size_t(rg.rank) < g.members.size()) g.members[size_t(rg.rank)] = v.rank;
  }

  void prepare(View& v, int index) {
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

  // ---- helpers ------------------------------------------------------------
  double age_s(int64_t since_ns) const { return since_ns > 0 ? double(options_.now_ns - since_ns) / 1e9 : 0.0; }

  static std::string seconds(double s) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3g s", s);
    return buf;
  }

  int view_of(int rank) const {
    auto it = by_rank_.find(rank);
    return it == by_rank_.end() ? -1 : it->second;
  }

  int group_of(const View& v, const RingRecord& r) const { return r.group >= 0 ? v.group_of[size_t(r.group)] : -1; }

  std::string group_text(int g) const {
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

  std::string op_text(const View& v, const RingRecord& r) const {
    std::string out(op_name(r.op));
    if (r.op == Op::Send) out += " to " + peer_text(v, r);
    if (r.op == Op::Recv) out += " from " + peer_text(v, r);
    if ((r.op == Op::Broadcast || r.op == Op::Reduce) && r.peer >= 0) out += " (root " + peer_text(v, r) + ")";
    return out + " of " + std::to_string(r.bytes) + " B";
  }

  // A peer's group rank as a global rank, where the members are known.
  std::string peer_text(const View& v, const RingRecord& r) const {
    const int g = group_of(v, r);
    const int global = g >= 0 && r.peer >= 0 && size_t(r.peer) < groups_[size_t(g)].members.size()
                           ? groups_[size_t(g)].members[size_t(r.peer)]
                           : -1;
    return global >= 0 ? "rank " + std::to_string(global) : "group rank " + std::to_string(r.peer);
  }

  std::string item_text(const Item& it) const {
    std::string out(op_name(it.op));
    if (is_point_to_point(it.op))
      out += std::string(it.op == Op::Send ? " to" : " from") + " group rank " + std::to_string(it.peer);
    return out + " of " + std::to_string(it.bytes) + " B of " + group_text(it.group);
  }

  std::string where(const View& v) const {
    return "phase " + std::string(phase_name(v.ring->phase)) + " of step " + std::to_string(v.ring->step);
  }

  std::string process_text(const View& v) const {
    if (v.ring->closed) return "its process exited";
    switch (v.live) {
      case Liveness::Stopped: return "its process is stopped";
      case Liveness::Gone: return "its process was killed";
      case Liveness::Running: return "its process is running";
      case Liveness::Unknown: return "";
    }
    return "";
  }

  std::string describe_rank_list(const std::vector<int>& view_indices) const {
    std::vector<int> ranks;
    for (int i : view_indices) ranks.push_back(views_[size_t(i)].rank);
    return rank_list(ranks);
  }

  static std::string rank_list(std::vector<int> ranks) {
    std::sort(ranks.begin(), ranks.end());
    ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
    std::string out = ranks.size() == 1 ? "rank " : "ranks ";
    for (size_t i = 0; i < ranks.size(); ++i) {
      if (i == 8 && ranks.size() > 9) return out + ", ... (" + std::to_string(ranks.size()) + " ranks)";
      out += (i ? ", " : "") + std::to_string(ranks[i]);
    }
    return out;
  }

  std::string waiting_line(const View& v) const {
    const RingRecord& r = *v.waiting.front();
    return "rank " + std::to_string(v.rank) + (r.state == State::Failed ? " failed in " : " waits in ") +
           op_text(v, r) + " #" + std::to_string(r.seq) + " of " + group_text(group_of(v, r)) + " (step " +
           std::to_string(r.step) + ", " + std::string(phase_name(r.phase)) + ")" +
           (r.state == State::Failed ? "" : " for " + seconds(age_s(r.started_ns)));
  }

  // Has view `v` started collective #seq of group g (or gone past it)?
  bool entered(int v, int g, uint64_t seq) const {
    auto it = collectives_.find({v, g});
    if (it == collectives_.end()) return false;
    auto at = it->second.lower_bound(seq);
    if (at == it->second.end()) return false;
    return at->first > seq || at->second->state >= State::Started;
  }

  bool frozen(int v) const {
    const View& view = views_[size_t(v)];
    return view.live == Liveness::Stopped || (view.live == Liveness::Gone && !view.ring->closed);
  }

  // The stopped or killed members still inside the collective view v is
  // stuck in.
  std::vector<int> frozen_members(int v) const {
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

  // Whether every other member of r's group finished it (collectives only).
  bool every_member_finished(int v, const RingRecord& r) const {
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

  // ---- 1. mismatch ----------------------------------------------------------
  struct Signature {
    Op op;
    uint64_t bytes;
    int peer;
    int64_t step;
    bool operator==(const Signature& o) const {
      return op == o.op && peer == o.peer && step == o.step && (op == Op::AllToAllV || bytes == o.bytes);
    }
  };
  static Signature signature(const RingRecord& r) {
    return {r.op, r.op == Op::AllToAllV ? 0 : r.bytes, (r.op == Op::Broadcast || r.op == Op::Reduce) ? r.peer : -1,
            r.step};
  }

  bool mismatch(Diagnosis& d) {
    // Per group: the records of each view by sequence number.
    std::map<int, std::vector<std::pair<int, const std::map<uint64_t, const RingRecord*>*>>> by_group;
    for (const auto& [key, seqs] : collectives_) by_group[key.second].push_back({key.first, &seqs});
    int best_group = -1;
    uint64_t best_seq = 0;
    int64_t best_time = 0;
    for (const auto& [g, holders] : by_group) {
      if (holders.size() < 2 || groups_[size_t(g)].size < 2) continue;
      std::set<uint64_t> seqs;
      for (const auto& h : holders)
        for (const auto& s : *h.second) seqs.insert(s.first);
      for (uint64_t seq : seqs) {
        std::vector<const RingRecord*> at;
        for (const auto& h : holders)
          if (auto it = h.second->find(seq); it != h.second->end()) at.push_back(it->second);
        if (at.size() < 2) continue;
        bool same = true;
        int64_t when = at.front()->scheduled_ns;
        for (const RingRecord* r : at) {
          same = same && signature(*r) == signature(*at.front());
          when = std::min(when, r->scheduled_ns);
        }
        if (same) continue;
        if (best_group < 0 || when < best_time) {
          best_group = g;
          best_seq = seq;
          best_time = when;
        }
        break;  // the group's first
      }
    }
    if (best_group < 0) return false;
    // Who disagrees, and with whom.
    std::vector<std::pair<int, const RingRecord*>> at;  // view, record
    for (const auto& h : by_group[best_group])
      if (auto it = h.second->find(best_seq); it != h.second->end()) at.push_back({h.first, it->second});
    std::vector<int> deviants;
    for (const auto& [v, r] : at)
      if (history(views_[size_t(v)], r->step) == History::Deviant) deviants.push_back(v);
    std::vector<int> culprits;
    if (deviants.size() == 1) {
      culprits = deviants;
    } else {
      // The minority, when there is a majority.
      std::vector<std::pair<Signature, std::vector<int>>> classes;
      for (const auto& [v, r] : at) {
        auto c = std::find_if(classes.begin(), classes.end(), [&](const auto& k) { return k.first == signature(*r); });
        if (c == classes.end()) classes.push_back({signature(*r), {v}});
        else c->second.push_back(v);
      }
      std::sort(classes.begin(), classes.end(),
                [](const auto& a, const auto& b) { return a.second.size() > b.second.size(); });
      if (classes.size() > 1 && 2 * classes.front().second.size() > at.size())
        for (size_t c = 1; c < classes.size(); ++c)
          culprits.insert(culprits.end(), classes[c].second.begin(), classes[c].second.end());
    }
    auto text_of = [&](int v, const RingRecord& r) {
      return op_text(views_[size_t(v)], r) + " (step " + std::to_string(r.step) + ", " +
             std::string(phase_name(r.phase)) + ")";
    };
    d.finding = Finding::Mismatch;
    std::string what = "#" + std::to_string(best_seq) + " of " + group_text(best_group) + " is ";
    if (culprits.empty()) {
      for (size_t i = 0; i < at.size(); ++i)
        what += std::string(i ? ", " : "") + text_of(at[i].first, *at[i].second) + " on rank " +
                std::to_string(views_[size_t(at[i].first)].rank);
      d.summary = "hang: no single culprit: the ranks disagree: " + what;
      return true;
    }
    for (int v : culprits) d.culprits.push_back(views_[size_t(v)].rank);
    std::sort(d.culprits.begin(), d.culprits.end());
    const int c = culprits.front();
    const RingRecord* mine = nullptr;
    const RingRecord* theirs = nullptr;
    std::vector<int> others;
    for (const auto& [v, r] : at) {
      if (v == c) mine = r;
      else if (std::find(culprits.begin(), culprits.end(), v) == culprits.end()) {
        theirs = theirs ? theirs : r;
        others.push_back(v);
      }
    }
    what += text_of(c, *mine) + " on " + rank_list(d.culprits);
    if (theirs) what += " but " + text_of(others.front(), *theirs) + " on " + describe_rank_list(others);
    d.summary = "culprit: " + rank_list(d.culprits) + ": mismatched collective: " + what;
    const std::string deviates = deviation_text(views_[size_t(c)], mine->step);
    if (!deviates.empty())
      d.details.insert(d.details.begin(), "rank " + std::to_string(views_[size_t(c)].rank) + " " + deviates);
    return true;
  }

  // ---- history ----------------------------------------------------------------
  // Whether view v's operations of `step` are a prefix of (or, once it went
  // past the step, equal to) those of one of the steps before.
  History history(const View& v, int64_t step, int64_t* compared = nullptr) const {
    auto it = v.steps.find(step);
    if (it == v.steps.end() || it->second.empty() || step == v.partial_step) return History::Unknown;
    const std::vector<Item>& now = it->second;
    const bool past = v.last_step > step;
    bool any = false;
    for (int64_t t = step - 1; t >= step - kHistorySteps && t >= 0; --t) {
      auto before = v.steps.find(t);
      if (before == v.steps.end() || before->second.empty() || t == v.partial_step) continue;
      const std::vector<Item>& then = before->second;
      if (!any && compared) *compared = t;
      any = true;
      if (past ? now == then : (now.size() <= then.size() && std::equal(now.begin(), now.end(), then.begin())))
        return History::Consistent;
    }
    return any ? History::Deviant : History::Unknown;
  }

  // "left out X of group G in step S (its step T made it at this point)", or
  // "made X in step S where its step T made Y"; empty when v does not deviate.
  std::string deviation_text(const View& v, int64_t step) const {
    int64_t t = -1;
    if (history(v, step, &t) != History::Deviant || t < 0) return "";
    const std::vector<Item>& now = v.steps.at(step);
    const std::vector<Item>& then = v.steps.at(t);
    size_t i = 0;
    while (i < now.size() && i < then.size() && now[i] == then[i]) ++i;
    const std::string in = " in step " + std::to_string(step) + " (its step " + std::to_string(t);
    if (i >= then.size()) return "made " + item_text(now[i]) + in + " made no more operations by then)";
    if (i >= now.size() || (i + 1 < then.size() && now[i] == then[i + 1]))
      return "left out " + item_text(then[i]) + in + " made it at this point)";
    return "made " + item_text(now[i]) + in + " made " + item_text(then[i]) + " at this point)";
  }

  // ---- 2. never entered ---------------------------------------------------------
  struct Edge {
    int waiter;  // view
    const RingRecord* op;
    int target;  // global rank
  };

  std::vector<Edge> edges_from(int w) const {
    std::vector<Edge> out;
    const View& v = views_[size_t(w)];
    for (const RingRecord* r : v.waiting) {
      const int g = group_of(v, *r);
      if (g < 0) continue;
      const Group& group = groups_[size_t(g)];
      if (is_point_to_point(r->op)) {
        if (r->peer < 0 || size_t(r->peer) >= group.members.size()) continue;
        const int peer = group.members[size_t(r->peer)];
        const int pv = view_of(peer);
        const int my_group_rank = v.ring->groups[size_t(r->group)].rank;
        const Op matching = r->op == Op::Send ? Op::Recv : Op::Send;
        uint64_t started = 0;
        if (pv >= 0)
          if (auto it = p2p_started_.find({pv, g, my_group_rank, int(matching)}); it != p2p_started_.end())
            started = it->second;
        if (pv < 0 || started < r->seq) out.push_back({w, r, peer});
        continue;
      }
      for (int m : group.members) {
        if (m < 0 || m == v.rank) continue;
        const int mv = view_of(m);
        if (mv < 0 || !entered(mv, g, r->seq)) out.push_back({w, r, m});
      }
    }
    return out;
  }

  bool never_entered(const std::vector<int>& waiters, Diagnosis& d) {
    std::vector<Edge> edges;
    std::set<int> seen;    // global ranks whose waits are followed
    std::set<int> judged;  // global ranks waited for, root or not
    std::deque<int> queue;
    for (int w : waiters) {
      seen.insert(views_[size_t(w)].rank);
      queue.push_back(w);
    }
    // Roots: ranks waited for that wait for nobody themselves: outside any
    // collective, or stuck in one that every other member entered.
    std::vector<int> roots;  // global ranks
    while (!queue.empty()) {
      const int w = queue.front();
      queue.pop_front();
      for (const Edge& e : edges_from(w)) {
        edges.push_back(e);
        if (!judged.insert(e.target).second) continue;
        const int tv = view_of(e.target);
        if (tv < 0 || edges_from(tv).empty()) roots.push_back(e.target);
        else if (seen.insert(e.target).second) queue.push_back(tv);
      }
    }
    if (roots.empty()) return false;
    // A root stuck in a collective that every member entered waits for a
    // member the rings cannot name, unless that member's process is stopped
    // or killed: then that one holds it (and everyone behind it) up.
    std::vector<int> refined;
    for (int root : roots) {
      const int tv = view_of(root);
      if (tv >= 0 && views_[size_t(tv)].blocked() && !frozen(tv)) {
        const std::vector<int> holders = frozen_members(tv);
        if (!holders.empty()) {
          refined.insert(refined.end(), holders.begin(), holders.end());
          continue;
        }
      }
      refined.push_back(root);
    }
    std::sort(refined.begin(), refined.end());
    refined.erase(std::unique(refined.begin(), refined.end()), refined.end());
    if (refined.size() > 1) {  // several: the stopped or killed ones, if any
      std::vector<int> stuck;
      for (int r : refined)
        if (view_of(r) >= 0 && frozen(view_of(r))) stuck.push_back(r);
      if (!stuck.empty()) refined = stuck;
    }
    roots = refined;
    d.finding = Finding::NeverEntered;
    d.culprits = roots;
    std::vector<std::string> parts;
    for (int root : roots) {
      // The operation it holds up, and who waits in it.
      const Edge* first = nullptr;
      std::vector<int> waiting;
      for (const Edge& e : edges)
        if (e.target == root) {
          if (!first) first = &e;
          if (group_of(views_[size_t(e.waiter)], *e.op) == group_of(views_[size_t(first->waiter)], *first->op) &&
              e.op->seq == first->op->seq && e.op->op == first->op->op)
            waiting.push_back(e.waiter);
        }
      if (!first) {  // a member that holds up a collective the ranks waited for are stuck in
        const View& c = views_[size_t(view_of(root))];
        const RingRecord& r = *c.waiting.front();
        parts.push_back("rank " + std::to_string(root) + " is stuck in " + op_text(c, r) + " #" +
                        std::to_string(r.seq) + " of " + group_text(group_of(c, r)) + " (step " +
                        std::to_string(r.step) + "), which holds up the ranks that others wait for; " +
                        process_text(c));
        continue;
      }
      const View& wv = views_[size_t(first->waiter)];
      const RingRecord& op = *first->op;
      const std::string at = " of " + group_text(group_of(wv, op)) + " (" + std::to_string(op.bytes) + " B, step " +
                             std::to_string(op.step) + ")";
      std::string text = "rank " + std::to_string(root);
      if (op.op == Op::Recv)
        text += " never sent message #" + std::to_string(op.seq) + " to rank " + std::to_string(wv.rank) + at +
                ", which rank " + std::to_string(wv.rank) + " waits to receive";
      else if (op.op == Op::Send)
        text += " never received message #" + std::to_string(op.seq) + " from rank " + std::to_string(wv.rank) + at +
                ", which rank " + std::to_string(wv.rank) + " waits to send";
      else
        text += " never entered " + op_text(wv, op) + " #" + std::to_string(op.seq) + " of " +
                group_text(group_of(wv, op)) + " (step " + std::to_string(op.step) + "), which " +
                describe_rank_list(waiting) + " " + (waiting.size() == 1 ? "waits" : "wait") + " in";
      const int rv = view_of(root);
      if (rv < 0) {
        text += "; rank " + std::to_string(root) + " has no flight ring (it never recorded, or its ring is unreadable)";
      } else {
        const View& c = views_[size_t(rv)];
        const std::string who = "; rank " + std::to_string(root);
        if (c.blocked()) {
          const RingRecord& r = *c.waiting.front();
          text += who + " is stuck in " + op_text(c, r) + " #" + std::to_string(r.seq) + " of " +
                  group_text(group_of(c, r)) + " (step " + std::to_string(r.step) + "), which " +
                  (is_point_to_point(r.op)             ? "its peer matched"
                   : every_member_finished(rv, r) ? "every other member finished"
                                                       : "every other member entered");
        } else {
          text += who + (c.ring->closed ? " exited in " : " is outside any collective, in ") + where(c);
        }
        const std::string process = c.ring->closed ? "" : process_text(c);
        if (!process.empty()) text += "; " + process;
        const std::string deviates = deviation_text(c, c.last_step);
        if (!deviates.empty()) d.details.push_back("rank " + std::to_string(root) + " " + deviates);
      }
      parts.push_back(text);
    }
    d.summary = "culprit: " + parts.front();
    for (size_t i = 1; i < parts.size(); ++i) d.summary += "; and " + parts[i];
    return true;
  }

  // ---- 3. deviation -------------------------------------------------------------
  bool deviation(Diagnosis& d) {
    std::vector<std::pair<int, int64_t>> deviants;  // view, step
    for (size_t i = 0; i < views_.size(); ++i) {
      const View& v = views_[i];
      // Its last two steps of training operations.
      std::vector<int64_t> steps;
      for (auto it = v.steps.rbegin(); it != v.steps.rend() && steps.size() < 2; ++it)
        if (!it->second.empty()) steps.push_back(it->first);
      for (auto s = steps.rbegin(); s != steps.rend(); ++s)
        if (history(v, *s) == History::Deviant) {
          deviants.push_back({int(i), *s});
          break;
        }
    }
    if (deviants.size() != 1) return false;
    const View& c = views_[size_t(deviants.front().first)];
    d.finding = Finding::Deviation;
    d.culprits = {c.rank};
    d.summary = "culprit: rank " + std::to_string(c.rank) + " " + deviation_text(c, deviants.front().second) +
                "; it is in " + where(c);
    const std::string process = process_text(c);
    if (!process.empty()) d.summary += "; " + process;
    return true;
  }

  // ---- 4. frozen ------------------------------------------------------------------
  bool frozen(Diagnosis& d) {
    std::vector<int> candidates;
    for (size_t i = 0; i < views_.size(); ++i) {
      const View& v = views_[i];
      if (v.live == Liveness::Stopped || (v.live == Liveness::Gone && !v.ring->closed)) candidates.push_back(int(i));
    }
    if (candidates.size() > 1) {
      // Ranks whose wait ended in a failure returned from it: the one that
      // never did is the one that froze.
      std::vector<int> unreturned;
      for (int i : candidates) {
        const View& v = views_[size_t(i)];
        if (v.waiting.empty() || v.waiting.back()->state != State::Failed) unreturned.push_back(i);
      }
      if (!unreturned.empty()) candidates = unreturned;
    }
    if (candidates.empty()) return false;
    d.finding = Finding::Frozen;
    for (int i : candidates) d.culprits.push_back(views_[size_t(i)].rank);
    const View& c = views_[size_t(candidates.front())];
    std::string text = "culprit: " + rank_list(d.culprits) + " is ";
    if (c.blocked()) {
      const RingRecord& r = *c.waiting.front();
      text += "stuck in " + op_text(c, r) + " #" + std::to_string(r.seq) + " of " + group_text(group_of(c, r)) +
              " (step " + std::to_string(r.step) + "), which every member entered";
    } else {
      text += "outside any collective, in " + where(c);
    }
    d.summary = text + "; " + process_text(c);
    return true;
  }

  DiagnosisOptions options_;
  std::vector<View> views_;
  std::vector<Group> groups_;
  std::map<std::pair<std::string, uint64_t>, int> group_ids_;
  std::map<int, int> by_rank_;
  std::map<std::pair<int, int>, std::map<uint64_t, const RingRecord*>> collectives_;  // (view, group) -> seq -> record
  std::map<std::tuple<int, int, int, int>, uint64_t> p2p_started_;  // (view, group, peer, op) -> highest started seq
};

}  // namespace

Diagnosis diagnose(const std::vector<RankRing>& rings, const std::vector<Liveness>& liveness,
                   const DiagnosisOptions& options) {
  return Analysis(rings, liveness, options).run();
}

std::string rank_table(const std::vector<RankRing>& rings, const std::vector<Liveness>& liveness,
                       const DiagnosisOptions& options) {
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line, "%5s  %-8s  %-48s %6s  %-9s  %9s  %-13s %6s\n", "rank", "process",
                "waits in / last operation", "seq", "state", "age", "phase", "step");
  out += line;
  for (size_t i = 0; i < rings.size(); ++i) {
    const RankRing& ring = rings[i];
    const Liveness live = i < liveness.size() ? liveness[i] : Liveness::Unknown;
    const std::string process = ring.closed ? "exited" : std::string(liveness_name(live));
    // The operation it waits in (the oldest started, unfinished), else its last.
    const RingRecord* shown = nullptr;
    for (const RingRecord& r : ring.records) {
      if (r.state == State::Failed) {
        shown = &r;
        break;
      }
      if (r.state == State::Started && (!shown || shown->state != State::Started)) shown = &r;
    }
    if (!shown && !ring.records.empty()) shown = &ring.records.back();
    std::string op = "-", seq = "-", state = "-", age = "-";
    if (shown) {
      const std::string group = shown->group >= 0 ? ring.groups[size_t(shown->group)].name : "?";
      op = std::string(op_name(shown->op)) + " " + std::to_string(shown->bytes) + " B " + group;
      if (is_point_to_point(shown->op)) op += (shown->op == Op::Send ? " to " : " from ") + std::to_string(shown->peer);
      seq = std::to_string(shown->seq);
      state = std::string(state_name(shown->state));
      const int64_t since = shown->state == State::Started ? shown->started_ns
                            : shown->ended_ns                ? shown->ended_ns
                                                             : shown->scheduled_ns;
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.2f s", double(options.now_ns - since) / 1e9);
      age = buf;
    }
    std::snprintf(line, sizeof line, "%5d  %-8s  %-48s %6s  %-9s  %9s  %-13s %6lld\n", ring.rank, process.c_str(),
                  op.c_str(), seq.c_str(), state.c_str(), age.c_str(), std::string(phase_name(ring.phase)).c_str(),
                  (long long)ring.step);
    out += line;
  }
  return out;
}

}  // namespace meshtrain::comm::flight
