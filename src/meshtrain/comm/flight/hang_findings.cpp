// The four findings of the hang diagnosis, tried in order (hang_analysis.hpp):
// a mismatch at one sequence number, a rank that never entered what the
// others wait in, a rank whose steps deviate from its own history, a process
// stopped or killed outside any operation.
#include "meshtrain/comm/flight/hang_analysis.hpp"

#include <algorithm>
#include <cstdio>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <tuple>

namespace meshtrain::comm::flight::detail {

Analysis::Signature Analysis::signature(const RingRecord& r) {
  return {r.op, r.op == Op::AllToAllV ? 0 : r.bytes, (r.op == Op::Broadcast || r.op == Op::Reduce) ? r.peer : -1,
          r.step};
}

std::optional<std::pair<int, uint64_t>> Analysis::first_mismatch() const {
  // Per group: the records of each view by sequence number.
  std::map<int, std::vector<const std::map<uint64_t, const RingRecord*>*>> by_group;
  for (const auto& [key, seqs] : collectives_) by_group[key.second].push_back(&seqs);
  std::optional<std::pair<int, uint64_t>> best;
  int64_t best_time = 0;
  for (const auto& [g, holders] : by_group) {
    if (holders.size() < 2 || groups_[size_t(g)].size < 2) continue;
    std::set<uint64_t> seqs;
    for (const auto* h : holders)
      for (const auto& s : *h) seqs.insert(s.first);
    for (uint64_t seq : seqs) {
      std::vector<const RingRecord*> at;
      for (const auto* h : holders)
        if (auto it = h->find(seq); it != h->end()) at.push_back(it->second);
      if (at.size() < 2) continue;
      bool same = true;
      int64_t when = at.front()->scheduled_ns;
      for (const RingRecord* r : at) {
        same = same && signature(*r) == signature(*at.front());
        when = std::min(when, r->scheduled_ns);
      }
      if (same) continue;
      if (!best || when < best_time) {
        best = {g, seq};
        best_time = when;
      }
      break;  // the group's first
    }
  }
  return best;
}

std::vector<int> Analysis::mismatch_culprits(const std::vector<std::pair<int, const RingRecord*>>& at) const {
  std::vector<int> deviants;
  for (const auto& [v, r] : at)
    if (history(views_[size_t(v)], r->step) == History::Deviant) deviants.push_back(v);
  if (deviants.size() == 1) return deviants;
  // The minority, when there is a majority.
  std::vector<std::pair<Signature, std::vector<int>>> classes;
  for (const auto& [v, r] : at) {
    auto c = std::find_if(classes.begin(), classes.end(), [&](const auto& k) { return k.first == signature(*r); });
    if (c == classes.end()) classes.push_back({signature(*r), {v}});
    else c->second.push_back(v);
  }
  std::sort(classes.begin(), classes.end(),
            [](const auto& a, const auto& b) { return a.second.size() > b.second.size(); });
  std::vector<int> culprits;
  if (classes.size() > 1 && 2 * classes.front().second.size() > at.size())
    for (size_t c = 1; c < classes.size(); ++c)
      culprits.insert(culprits.end(), classes[c].second.begin(), classes[c].second.end());
  return culprits;
}

bool Analysis::mismatch(Diagnosis& d) {
  const auto found = first_mismatch();
  if (!found) return false;
  const auto [group, seq] = *found;
  // Who disagrees, and with whom.
  std::vector<std::pair<int, const RingRecord*>> at;  // view, record
  for (const auto& [key, seqs] : collectives_)
    if (key.second == group)
      if (auto it = seqs.find(seq); it != seqs.end()) at.push_back({key.first, it->second});
  const std::vector<int> culprits = mismatch_culprits(at);
  auto text_of = [&](int v, const RingRecord& r) {
    return op_text(views_[size_t(v)], r) + " (step " + std::to_string(r.step) + ", " +
           std::string(phase_name(r.phase)) + ")";
  };
  d.finding = Finding::Mismatch;
  std::string what = "#" + std::to_string(seq) + " of " + group_text(group) + " is ";
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

History Analysis::history(const View& v, int64_t step, int64_t* compared) const {
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

std::string Analysis::deviation_text(const View& v, int64_t step) const {
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

std::vector<Analysis::Edge> Analysis::edges_from(int w) const {
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

std::vector<int> Analysis::waited_for_roots(const std::vector<int>& waiters, std::vector<Edge>& edges) const {
  std::set<int> seen;    // global ranks whose waits are followed
  std::set<int> judged;  // global ranks waited for, root or not
  std::deque<int> queue;
  for (int w : waiters) {
    seen.insert(views_[size_t(w)].rank);
    queue.push_back(w);
  }
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
  return roots;
}

std::vector<int> Analysis::holders_of(const std::vector<int>& roots) const {
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
  return refined;
}

std::string Analysis::held_up_text(int root, const Edge& first, const std::vector<int>& waiting) const {
  const View& wv = views_[size_t(first.waiter)];
  const RingRecord& op = *first.op;
  const std::string at = " of " + group_text(group_of(wv, op)) + " (" + std::to_string(op.bytes) + " B, step " +
                         std::to_string(op.step) + ")";
  std::string text = "rank " + std::to_string(root);
  if (op.op == Op::Recv)
    return text + " never sent message #" + std::to_string(op.seq) + " to rank " + std::to_string(wv.rank) + at +
           ", which rank " + std::to_string(wv.rank) + " waits to receive";
  if (op.op == Op::Send)
    return text + " never received message #" + std::to_string(op.seq) + " from rank " + std::to_string(wv.rank) +
           at + ", which rank " + std::to_string(wv.rank) + " waits to send";
  return text + " never entered " + op_text(wv, op) + " #" + std::to_string(op.seq) + " of " +
         group_text(group_of(wv, op)) + " (step " + std::to_string(op.step) + "), which " +
         describe_rank_list(waiting) + " " + (waiting.size() == 1 ? "waits" : "wait") + " in";
}

std::string Analysis::root_state_text(int root) const {
  const int rv = view_of(root);
  if (rv < 0) return "; rank " + std::to_string(root) + " has no flight ring (it never recorded, or its ring is unreadable)";
  const View& c = views_[size_t(rv)];
  std::string text = "; rank " + std::to_string(root);
  if (c.blocked()) {
    const RingRecord& r = *c.waiting.front();
    text += " is stuck in " + op_text(c, r) + " #" + std::to_string(r.seq) + " of " + group_text(group_of(c, r)) +
            " (step " + std::to_string(r.step) + "), which " +
            (is_point_to_point(r.op)         ? "its peer matched"
             : every_member_finished(rv, r) ? "every other member finished"
                                             : "every other member entered");
  } else {
    text += (c.ring->closed ? " exited in " : " is outside any collective, in ") + where(c);
  }
  const std::string process = c.ring->closed ? "" : process_text(c);
  if (!process.empty()) text += "; " + process;
  return text;
}

bool Analysis::never_entered(const std::vector<int>& waiters, Diagnosis& d) {
  std::vector<Edge> edges;
  // Roots: ranks waited for that wait for nobody themselves: outside any
  // collective, or stuck in one that every other member entered. A root
  // stuck in a collective that every member entered waits for a member the
  // rings cannot name, unless that member's process is stopped or killed:
  // then that one holds it (and everyone behind it) up.
  const std::vector<int> roots = waited_for_roots(waiters, edges);
  if (roots.empty()) return false;
  d.finding = Finding::NeverEntered;
  d.culprits = holders_of(roots);
  std::vector<std::string> parts;
  for (int root : d.culprits) {
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
    parts.push_back(held_up_text(root, *first, waiting) + root_state_text(root));
    if (const int rv = view_of(root); rv >= 0) {
      const std::string deviates = deviation_text(views_[size_t(rv)], views_[size_t(rv)].last_step);
      if (!deviates.empty()) d.details.push_back("rank " + std::to_string(root) + " " + deviates);
    }
  }
  d.summary = "culprit: " + parts.front();
  for (size_t i = 1; i < parts.size(); ++i) d.summary += "; and " + parts[i];
  return true;
}

bool Analysis::deviation(Diagnosis& d) {
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

bool Analysis::frozen(Diagnosis& d) {
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

}  // namespace meshtrain::comm::flight::detail
