// The hang diagnosis over synthetic rings: each way a hang shows in them,
// and what is not a hang.
#include "meshtrain/comm/flight/hang_diagnosis.hpp"

#include <gtest/gtest.h>

#include <initializer_list>

namespace meshtrain::comm::flight {
namespace {

constexpr int64_t kSecond = 1000000000;
constexpr int64_t kNow = 1000 * kSecond;

// One rank's ring, written by hand.
class Ring {
 public:
  Ring(int rank, int world) {
    ring_.rank = rank;
    ring_.world = world;
    ring_.pid = 1000 + rank;
    ring_.host = "h";
    ring_.job_id = "job";
  }
  // A group as this rank sees it; returns its index.
  int group(const std::string& name, std::vector<int> members) {
    uint64_t hash = 0;
    for (int m : members) hash = hash * 31 + uint64_t(m) + 1;
    const int rank = int(std::find(members.begin(), members.end(), ring_.rank) - members.begin());
    ring_.groups.push_back({name, hash, int(members.size()), rank, std::move(members)});
    return int(ring_.groups.size() - 1);
  }
  // An operation; `at` is its time in seconds before kNow (a Started one
  // has waited that long).
  Ring& op(int group, Op op, uint64_t seq, uint64_t bytes, int64_t step, Phase phase, State state, double at = 100,
           int peer = -1) {
    RingRecord r;
    r.index = ring_.records.size();
    r.group = group;
    r.op = op;
    r.seq = seq;
    r.bytes = bytes;
    r.step = step;
    r.phase = phase;
    r.state = state;
    r.peer = peer;
    r.scheduled_ns = kNow - int64_t(at * kSecond);
    r.started_ns = state >= State::Started ? r.scheduled_ns : 0;
    r.ended_ns = state >= State::Completed ? r.scheduled_ns + 1000 : 0;
    ring_.records.push_back(r);
    return *this;
  }
  Ring& at(int64_t step, Phase phase) {
    ring_.step = step;
    ring_.phase = phase;
    return *this;
  }
  Ring& closed() {
    ring_.closed = true;
    return *this;
  }
  const RankRing& get() const { return ring_; }

 private:
  RankRing ring_;
};

Diagnosis run(const std::vector<Ring>& rings, std::vector<Liveness> live = {}) {
  std::vector<RankRing> rs;
  for (const Ring& r : rings) rs.push_back(r.get());
  return diagnose(rs, live, {.now_ns = kNow, .min_wait_s = 1.0});
}

std::string explain(const Diagnosis& d) {
  std::string out = std::string(finding_name(d.finding)) + ": " + d.summary;
  for (const auto& l : d.details) out += "\n  " + l;
  return out;
}

// Data parallelism on 2 ranks: each step a gradient all-reduce (B bytes,
// backward) and a loss sum (8 bytes, communication), steps 1 .. steps.
constexpr uint64_t B = 4096;
void dp_steps(Ring& r, int g, int64_t steps, double at = 100) {
  for (int64_t s = 1; s <= steps; ++s) {
    r.op(g, Op::AllReduce, uint64_t(2 * s - 1), B, s, Phase::Backward, State::Completed, at);
    r.op(g, Op::AllReduce, uint64_t(2 * s), 8, s, Phase::Communication, State::Completed, at);
  }
}

TEST(HangDiagnosisTest, NoHangWhenEverythingFinished) {
  Ring a(0, 2), b(1, 2);
  dp_steps(a, a.group("data", {0, 1}), 3);
  dp_steps(b, b.group("data", {0, 1}), 3);
  const Diagnosis d = run({a, b});
  EXPECT_EQ(d.finding, Finding::NoHang) << explain(d);
  EXPECT_FALSE(d.named());
}

TEST(HangDiagnosisTest, AnOperationStartedMomentsAgoIsNoHang) {
  Ring a(0, 2), b(1, 2);
  const int ga = a.group("data", {0, 1}), gb = b.group("data", {0, 1});
  dp_steps(a, ga, 2);
  dp_steps(b, gb, 2);
  a.op(ga, Op::AllReduce, 5, B, 3, Phase::Backward, State::Started, 0.01);
  EXPECT_EQ(run({a, b}).finding, Finding::NoHang);
}

TEST(HangDiagnosisTest, TheRankThatNeverEnteredIsNamedWithItsPhase) {
  Ring a(0, 2), b(1, 2);
  const int ga = a.group("data", {0, 1}), gb = b.group("data", {0, 1});
  dp_steps(a, ga, 2);
  dp_steps(b, gb, 2);
  a.op(ga, Op::AllReduce, 5, B, 3, Phase::Backward, State::Started, 30).at(3, Phase::Communication);
  b.at(3, Phase::Forward);  // computing, or stopped, outside any collective
  const Diagnosis d = run({a, b}, {Liveness::Running, Liveness::Stopped});
  EXPECT_EQ(d.finding, Finding::NeverEntered) << explain(d);
  EXPECT_EQ(d.culprits, std::vector<int>{1});
  EXPECT_NE(d.summary.find("culprit: rank 1 never entered all_reduce of 4096 B #5 of group data [0, 1] (step 3), "
                           "which rank 0 waits in"),
            std::string::npos)
      << d.summary;
  EXPECT_NE(d.summary.find("outside any collective, in phase forward of step 3"), std::string::npos) << d.summary;
  EXPECT_NE(d.summary.find("stopped"), std::string::npos) << d.summary;
}

TEST(HangDiagnosisTest, AfterTheTimeoutTheFailedWaitsStillNameTheCulprit) {
  // Post mortem: rank 0 timed out (failed) and exited; what it did after the
  // failure (a shutdown collective) says nothing; rank 1 was killed.
  Ring a(0, 2), b(1, 2);
  const int ga = a.group("data", {0, 1}), gb = b.group("data", {0, 1});
  dp_steps(a, ga, 2);
  dp_steps(b, gb, 2);
  a.op(ga, Op::AllReduce, 5, B, 3, Phase::Backward, State::Failed, 10);
  a.op(ga, Op::Barrier, 6, 0, 3, Phase::Backward, State::Scheduled, 5).closed();
  const Diagnosis d = run({a, b}, {Liveness::Gone, Liveness::Gone});
  EXPECT_EQ(d.finding, Finding::NeverEntered) << explain(d);
  EXPECT_EQ(d.culprits, std::vector<int>{1});
  EXPECT_NE(d.summary.find("#5 of group data"), std::string::npos) << d.summary;
}

TEST(HangDiagnosisTest, ASizeMismatchNamesTheRankThatDeviatesFromItsOwnSteps) {
  Ring a(0, 2), b(1, 2);
  const int ga = a.group("data", {0, 1}), gb = b.group("data", {0, 1});
  dp_steps(a, ga, 2);
  dp_steps(b, gb, 2);
  a.op(ga, Op::AllReduce, 5, B, 3, Phase::Backward, State::Failed, 3);
  b.op(gb, Op::AllReduce, 5, B / 2, 3, Phase::Backward, State::Failed, 3);
  const Diagnosis d = run({a, b});
  EXPECT_EQ(d.finding, Finding::Mismatch) << explain(d);
  EXPECT_EQ(d.culprits, std::vector<int>{1});
  EXPECT_NE(d.summary.find("#5 of group data [0, 1] is all_reduce of 2048 B (step 3, backward) on rank 1 but "
                           "all_reduce of 4096 B (step 3, backward) on rank 0"),
            std::string::npos)
      << d.summary;
  ASSERT_FALSE(d.details.empty());
  EXPECT_NE(d.details[0].find("rank 1 made all_reduce of 2048 B of group data [0, 1] in step 3 (its step 2 made "
                              "all_reduce of 4096 B"),
            std::string::npos)
      << d.details[0];
}

TEST(HangDiagnosisTest, ADifferentCollectiveIsAMismatch) {
  Ring a(0, 2), b(1, 2);
  const int ga = a.group("tensor", {0, 1}), gb = b.group("tensor", {0, 1});
  dp_steps(a, ga, 2);
  dp_steps(b, gb, 2);
  a.op(ga, Op::AllReduce, 5, B, 3, Phase::Backward, State::Started, 20);
  b.op(gb, Op::Barrier, 5, 0, 3, Phase::Backward, State::Started, 20);
  const Diagnosis d = run({a, b});
  EXPECT_EQ(d.finding, Finding::Mismatch) << explain(d);
  EXPECT_EQ(d.culprits, std::vector<int>{1});
  EXPECT_NE(d.summary.find("barrier of 0 B (step 3, backward) on rank 1"), std::string::npos) << d.summary;
}

TEST(HangDiagnosisTest, ASkippedCollectiveShiftsTheSequenceAndIsNamedAsLeftOut) {
  // Rank 1 skips step 3's gradient all-reduce: its #5 is the loss sum.
  Ring a(0, 2), b(1, 2);
  const int ga = a.group("data", {0, 1}), gb = b.group("data", {0, 1});
  dp_steps(a, ga, 2);
  dp_steps(b, gb, 2);
  a.op(ga, Op::AllReduce, 5, B, 3, Phase::Backward, State::Failed, 2);
  b.op(gb, Op::AllReduce, 5, 8, 3, Phase::Communication, State::Failed, 2);
  const Diagnosis d = run({a, b});
  EXPECT_EQ(d.finding, Finding::Mismatch) << explain(d);
  EXPECT_EQ(d.culprits, std::vector<int>{1});
  ASSERT_FALSE(d.details.empty());
  EXPECT_NE(d.details[0].find("rank 1 left out all_reduce of 4096 B of group data [0, 1] in step 3"),
            std::string::npos)
      << d.details[0];
}

TEST(HangDiagnosisTest, ASkipThatDeadlocksTwoGroupsIsFoundInTheRanksHistory) {
  // A pipeline's two groups: each step a loss sum on "pipeline", then the
  // tied embedding's sum on "embedding". Rank 1 leaves out the loss sum of
  // step 3: rank 0 waits in pipeline #3, rank 1 in embedding #3; at no
  // sequence number do they disagree.
  Ring a(0, 2), b(1, 2);
  const int pa = a.group("pipeline", {0, 1}), ea = a.group("embedding", {0, 1});
  const int pb = b.group("pipeline", {0, 1}), eb = b.group("embedding", {0, 1});
  for (int64_t s = 1; s <= 2; ++s) {
    for (auto [r, p, e] : {std::tuple{&a, pa, ea}, std::tuple{&b, pb, eb}}) {
      r->op(p, Op::AllReduce, uint64_t(s), 8, s, Phase::Backward, State::Completed);
      r->op(e, Op::AllReduce, uint64_t(s), B, s, Phase::Communication, State::Completed);
    }
  }
  a.op(pa, Op::AllReduce, 3, 8, 3, Phase::Backward, State::Started, 10);
  b.op(eb, Op::AllReduce, 3, B, 3, Phase::Communication, State::Started, 10).at(3, Phase::Communication);
  const Diagnosis d = run({a, b});
  EXPECT_EQ(d.finding, Finding::Deviation) << explain(d);
  EXPECT_EQ(d.culprits, std::vector<int>{1});
  EXPECT_NE(d.summary.find("culprit: rank 1 left out all_reduce of 8 B of group pipeline [0, 1] in step 3 (its step 2 "
                           "made it at this point)"),
            std::string::npos)
      << d.summary;
}

TEST(HangDiagnosisTest, WithoutHistoryTheMinorityIsTheCulprit) {
  std::vector<Ring> rings;
  for (int r = 0; r < 4; ++r) {
    rings.emplace_back(r, 4);
    const int g = rings.back().group("data", {0, 1, 2, 3});
    rings.back().op(g, Op::AllGather, 1, r == 2 ? B / 2 : B, 1, Phase::Forward, State::Started, 10);
  }
  const Diagnosis d = run(rings);
  EXPECT_EQ(d.finding, Finding::Mismatch) << explain(d);
  EXPECT_EQ(d.culprits, std::vector<int>{2});
}

TEST(HangDiagnosisTest, ATieWithoutHistoryNamesNobody) {
  Ring a(0, 2), b(1, 2);
  a.op(a.group("data", {0, 1}), Op::AllReduce, 1, B, 1, Phase::Backward, State::Started, 10);
  b.op(b.group("data", {0, 1}), Op::AllReduce, 1, B / 2, 1, Phase::Backward, State::Started, 10);
  const Diagnosis d = run({a, b});
  EXPECT_EQ(d.finding, Finding::Mismatch) << explain(d);
  EXPECT_FALSE(d.named());
  EXPECT_NE(d.summary.find("no single culprit"), std::string::npos) << d.summary;
}

TEST(HangDiagnosisTest, AStoppedRankInsideACollectiveEveryoneEnteredIsFrozen) {
  Ring a(0, 2), b(1, 2);
  const int ga = a.group("data", {0, 1}), gb = b.group("data", {0, 1});
  dp_steps(a, ga, 2);
  dp_steps(b, gb, 2);
  a.op(ga, Op::AllReduce, 5, B, 3, Phase::Backward, State::Started, 10);
  b.op(gb, Op::AllReduce, 5, B, 3, Phase::Backward, State::Started, 10);
  const Diagnosis d = run({a, b}, {Liveness::Running, Liveness::Stopped});
  EXPECT_EQ(d.finding, Finding::Frozen) << explain(d);
  EXPECT_EQ(d.culprits, std::vector<int>{1});
  EXPECT_NE(d.summary.find("stuck in all_reduce of 4096 B #5 of group data [0, 1]"), std::string::npos) << d.summary;
  // Without knowing the processes, nobody can be named.
  const Diagnosis unknown = run({a, b});
  EXPECT_EQ(unknown.finding, Finding::Unnamed) << explain(unknown);
  EXPECT_FALSE(unknown.named());
}

TEST(HangDiagnosisTest, AKilledRankIsNamedAfterTheOthersExited) {
  // Post mortem: both entered #5; rank 0 failed (timed out) and exited;
  // rank 1 never came back from it.
  Ring a(0, 2), b(1, 2);
  const int ga = a.group("data", {0, 1}), gb = b.group("data", {0, 1});
  dp_steps(a, ga, 2);
  dp_steps(b, gb, 2);
  a.op(ga, Op::AllReduce, 5, B, 3, Phase::Backward, State::Failed, 10).closed();
  b.op(gb, Op::AllReduce, 5, B, 3, Phase::Backward, State::Started, 10);
  const Diagnosis d = run({a, b}, {Liveness::Gone, Liveness::Gone});
  EXPECT_EQ(d.finding, Finding::Frozen) << explain(d);
  EXPECT_EQ(d.culprits, std::vector<int>{1});
}

TEST(HangDiagnosisTest, AReceiveWaitsForTheSenderThatNeverSent) {
  Ring a(0, 2), b(1, 2);
  const int ga = a.group("pipeline", {0, 1}), gb = b.group("pipeline", {0, 1});
  for (uint64_t k = 1; k <= 2; ++k) {
    a.op(ga, Op::Recv, k, 8192, 1, Phase::Backward, State::Completed, 50, 1);
    b.op(gb, Op::Send, k, 8192, 1, Phase::Backward, State::Completed, 50, 0);
  }
  a.op(ga, Op::Recv, 3, 8192, 2, Phase::Backward, State::Started, 10, 1);
  b.at(2, Phase::Forward);
  const Diagnosis d = run({a, b});
  EXPECT_EQ(d.finding, Finding::NeverEntered) << explain(d);
  EXPECT_EQ(d.culprits, std::vector<int>{1});
  EXPECT_NE(d.summary.find("rank 1 never sent message #3 to rank 0 of group pipeline [0, 1] (8192 B, step 2)"),
            std::string::npos)
      << d.summary;
  // Once rank 1 has started that send, rank 0's wait is not on it.
  b.op(gb, Op::Send, 3, 8192, 2, Phase::Forward, State::Started, 10, 0);
  EXPECT_NE(run({a, b}).finding, Finding::NeverEntered);
}

TEST(HangDiagnosisTest, WaitsAreFollowedAcrossGroupsToTheRankOutsideThem) {
  // 2 tensor x 2 data ways (tensor groups [0, 1], [2, 3]; data [0, 2],
  // [1, 3]). Rank 3 is outside; rank 2 waits for it in its tensor group,
  // ranks 0 and 1 wait in the data groups for 2 and 3.
  std::vector<Ring> rings;
  for (int r = 0; r < 4; ++r) rings.emplace_back(r, 4);
  auto tensor = [](int r) { return r < 2 ? std::vector<int>{0, 1} : std::vector<int>{2, 3}; };
  auto data = [](int r) { return r % 2 == 0 ? std::vector<int>{0, 2} : std::vector<int>{1, 3}; };
  std::vector<int> gt, gd;
  for (int r = 0; r < 4; ++r) {
    gt.push_back(rings[size_t(r)].group("tensor", tensor(r)));
    gd.push_back(rings[size_t(r)].group("data", data(r)));
    rings[size_t(r)].op(gt[size_t(r)], Op::AllReduce, 1, B, 1, Phase::Forward, State::Completed, 50);
    rings[size_t(r)].op(gd[size_t(r)], Op::AllReduce, 1, B, 1, Phase::Backward, State::Completed, 50);
  }
  rings[2].op(gt[2], Op::AllReduce, 2, B, 2, Phase::Forward, State::Started, 10);
  for (int r : {0, 1}) {
    rings[size_t(r)].op(gt[size_t(r)], Op::AllReduce, 2, B, 2, Phase::Forward, State::Completed, 12);
    rings[size_t(r)].op(gd[size_t(r)], Op::AllReduce, 2, B, 2, Phase::Backward, State::Started, 10);
  }
  rings[3].at(2, Phase::Data);
  const Diagnosis d = run(rings);
  EXPECT_EQ(d.finding, Finding::NeverEntered) << explain(d);
  EXPECT_EQ(d.culprits, std::vector<int>{3});
  EXPECT_NE(d.summary.find("rank 3 never entered all_reduce of 4096 B #2 of group "), std::string::npos) << d.summary;
}

TEST(HangDiagnosisTest, AStoppedMemberHoldsUpTheCollectiveItsPeersAreStuckIn) {
  // Ranks 0 and 1 wait for 1 and... nobody: rank 1 is stuck in all #2, which
  // every member entered; rank 0 finished it and waits in data #2 for rank
  // 1; rank 2, stopped, is still inside all #2 too.
  std::vector<Ring> rings;
  for (int r = 0; r < 3; ++r) rings.emplace_back(r, 3);
  std::vector<int> all, data;
  for (int r = 0; r < 3; ++r) {
    all.push_back(rings[size_t(r)].group("all", {0, 1, 2}));
    data.push_back(r < 2 ? rings[size_t(r)].group("data", {0, 1}) : -1);
    rings[size_t(r)].op(all[size_t(r)], Op::AllReduce, 1, 8, 1, Phase::Optimizer, State::Completed, 50);
  }
  rings[0].op(all[0], Op::AllReduce, 2, 8, 1, Phase::Optimizer, State::Completed, 20);
  rings[0].op(data[0], Op::AllReduce, 1, B, 2, Phase::Backward, State::Started, 10);
  rings[1].op(all[1], Op::AllReduce, 2, 8, 1, Phase::Optimizer, State::Started, 20);
  rings[2].op(all[2], Op::AllReduce, 2, 8, 1, Phase::Optimizer, State::Started, 20);
  const Diagnosis d = run(rings, {Liveness::Running, Liveness::Running, Liveness::Stopped});
  EXPECT_EQ(d.culprits, std::vector<int>{2}) << explain(d);
}

TEST(HangDiagnosisTest, ARankWithoutARingIsNamedWhenOthersWaitForIt) {
  Ring a(0, 2);
  a.op(a.group("data", {0, 1}), Op::AllReduce, 1, B, 1, Phase::Backward, State::Started, 10);
  const Diagnosis d = run({a});
  EXPECT_EQ(d.finding, Finding::NeverEntered) << explain(d);
  EXPECT_EQ(d.culprits, std::vector<int>{1});
  EXPECT_NE(d.summary.find("has no flight ring"), std::string::npos) << d.summary;
}

TEST(HangDiagnosisTest, TheTableHasARowPerRank) {
  Ring a(0, 2), b(1, 2);
  const int ga = a.group("data", {0, 1}), gb = b.group("data", {0, 1});
  dp_steps(a, ga, 1);
  dp_steps(b, gb, 1);
  a.op(ga, Op::AllReduce, 3, B, 2, Phase::Backward, State::Started, 4).at(2, Phase::Communication);
  b.at(2, Phase::Forward);
  std::vector<RankRing> rs{a.get(), b.get()};
  const std::string table = rank_table(rs, {Liveness::Running, Liveness::Stopped}, {.now_ns = kNow});
  EXPECT_NE(table.find("    0  running   all_reduce 4096 B data"), std::string::npos) << table;
  EXPECT_NE(table.find("started"), std::string::npos) << table;
  EXPECT_NE(table.find("4.00 s"), std::string::npos) << table;
  EXPECT_NE(table.find("    1  stopped   all_reduce 8 B data"), std::string::npos) << table;
  EXPECT_NE(table.find("forward"), std::string::npos) << table;
}

}  // namespace
}  // namespace meshtrain::comm::flight
