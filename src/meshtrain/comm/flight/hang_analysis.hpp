#pragma once
// The hang diagnosis's working state (hang_diagnosis.hpp): every rank's ring
// as a view, the groups the rings together know, and the four findings tried
// in order. Internal to comm/flight: hang_analysis.cpp prepares the views and
// holds the shared helpers, hang_findings.cpp the findings.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "meshtrain/comm/flight/hang_diagnosis.hpp"

namespace meshtrain::comm::flight::detail {

inline constexpr int kHistorySteps = 16;  // earlier steps a step is compared with

inline bool training_phase(Phase p) {
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

  Diagnosis run();

 private:
  // ---- preparation ------------------------------------------------------
  int group_id(const RingGroup& g);
  void fill_members(const View& v, int ring_group);
  void prepare(View& v, int index);

  // ---- helpers ------------------------------------------------------------
  double age_s(int64_t since_ns) const { return since_ns > 0 ? double(options_.now_ns - since_ns) / 1e9 : 0.0; }

  static std::string seconds(double s);
  int view_of(int rank) const;

  int group_of(const View& v, const RingRecord& r) const { return r.group >= 0 ? v.group_of[size_t(r.group)] : -1; }

  std::string group_text(int g) const;
  std::string op_text(const View& v, const RingRecord& r) const;

  // A peer's group rank as a global rank, where the members are known.
  std::string peer_text(const View& v, const RingRecord& r) const;
  std::string item_text(const Item& it) const;
  std::string where(const View& v) const;
  std::string process_text(const View& v) const;
  std::string describe_rank_list(const std::vector<int>& view_indices) const;
  static std::string rank_list(std::vector<int> ranks);
  std::string waiting_line(const View& v) const;

  // Has view `v` started collective #seq of group g (or gone past it)?
  bool entered(int v, int g, uint64_t seq) const;
  bool frozen(int v) const;

  // The stopped or killed members still inside the collective view v is
  // stuck in.
  std::vector<int> frozen_members(int v) const;

  // Whether every other member of r's group finished it (collectives only).
  bool every_member_finished(int v, const RingRecord& r) const;

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
  static Signature signature(const RingRecord& r);
  // The earliest scheduled collective, over all groups, whose views' records
  // disagree (each group's first disagreement): (group, seq).
  std::optional<std::pair<int, uint64_t>> first_mismatch() const;
  // The views to blame among those at one sequence number (view, record):
  // the one whose history deviates, else the minority under a majority.
  std::vector<int> mismatch_culprits(const std::vector<std::pair<int, const RingRecord*>>& at) const;
  bool mismatch(Diagnosis& d);

  // ---- history ----------------------------------------------------------------
  // Whether view v's operations of `step` are a prefix of (or, once it went
  // past the step, equal to) those of one of the steps before.
  History history(const View& v, int64_t step, int64_t* compared = nullptr) const;

  // "left out X of group G in step S (its step T made it at this point)", or
  // "made X in step S where its step T made Y"; empty when v does not deviate.
  std::string deviation_text(const View& v, int64_t step) const;

  // ---- 2. never entered ---------------------------------------------------------
  struct Edge {
    int waiter;  // view
    const RingRecord* op;
    int target;  // global rank
  };
  std::vector<Edge> edges_from(int w) const;
  // Follows the waits from `waiters` (views) breadth first, adding each to
  // `edges`; returns the global ranks waited for that wait for nobody.
  std::vector<int> waited_for_roots(const std::vector<int>& waiters, std::vector<Edge>& edges) const;
  // Each root replaced by the stopped or killed members holding it up, if
  // any; among several, only the stopped or killed ones, if any.
  std::vector<int> holders_of(const std::vector<int>& roots) const;
  // "rank R never entered/sent/received X, which ... wait(s) in".
  std::string held_up_text(int root, const Edge& first, const std::vector<int>& waiting) const;
  // "; rank R is stuck in / is outside any collective / exited ...".
  std::string root_state_text(int root) const;
  bool never_entered(const std::vector<int>& waiters, Diagnosis& d);

  // ---- 3. deviation -------------------------------------------------------------
  bool deviation(Diagnosis& d);

  // ---- 4. frozen ------------------------------------------------------------------
  bool frozen(Diagnosis& d);
  DiagnosisOptions options_;
  std::vector<View> views_;
  std::vector<Group> groups_;
  std::map<std::pair<std::string, uint64_t>, int> group_ids_;
  std::map<int, int> by_rank_;
  std::map<std::pair<int, int>, std::map<uint64_t, const RingRecord*>> collectives_;  // (view, group) -> seq -> record
  std::map<std::tuple<int, int, int, int>, uint64_t> p2p_started_;  // (view, group, peer, op) -> highest started seq
};

}  // namespace meshtrain::comm::flight::detail
