// ZeRO's parts with threads as ranks over the in-process transport:
// ParamGatherer's gathers rebuild the whole parameters from the shards (to
// the bit, or to their bf16 rounding), GradReducer leaves each rank the
// average of its slice (padding zero, later micro-batches added), and a
// ZeroEngine step of a small GPT over 3 ranks is the one-process AdamW step
// on the global batch within a stated tolerance. The step engine's use of
// all this, strategy by strategy: tests/unit/train/engine/.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "meshtrain/comm/group/process_group.hpp"
#include "meshtrain/comm/transport/inproc/inproc_transport.hpp"
#include "meshtrain/core/bf16.hpp"
#include "meshtrain/core/error.hpp"
#include "meshtrain/nn/gpt.hpp"
#include "meshtrain/optim/factory.hpp"
#include "meshtrain/parallel/zero/grad_reducer.hpp"
#include "meshtrain/parallel/zero/param_gatherer.hpp"
#include "meshtrain/parallel/zero/zero_engine.hpp"
#include "thread_ranks.hpp"

namespace meshtrain::parallel {
namespace {

// Units: [a 37, b 5] whole-step; blk0 {w 123, b 7}; blk1 {w 130}; blk2 {w 9}
// (one slice: the ranks past the first own none of it); [head 21] whole-step.
void declare_store(ParamStore& s) {
  s.declare("a", {37}, true);
  s.declare("b", {5}, false);
  for (const auto& [name, n] : {std::pair{"blk0", 123}, {"blk1", 130}, {"blk2", 9}}) {
    s.begin_unit(name);
    s.declare(std::string(name) + ".w", {n}, true);
    if (std::string(name) == "blk0") s.declare("blk0.b", {7}, false);
    s.end_unit();
  }
  s.declare("head", {21}, true);
  s.allocate();
}

// A parameter value with more than bf16's 8 significant bits.
float param_value(size_t i) { return float(int(i * 37 % 1001) - 500) / 256.0f + 1.0f / 4096.0f; }
// Rank r's gradient: a multiple of 1/64 small enough that sums over 4 ranks
// and their division by 1-4 are exact, in fp32 and in bf16.
float grad_value(int r, size_t i, int pass) {
  return float(int((size_t(r) * 7 + i * 3 + size_t(pass) * 5) % 13) - 6) / 64.0f;
}

// Runs fn(group) on `ranks` threads, one rank each; rethrows the first error.
void run_ranks(int ranks, const std::function<void(comm::ProcessGroup&)>& fn) {
  testing::on_inproc_ranks(ranks, [&](int, comm::ProcessGroup& group) { fn(group); });
}

// Every view element's parameter as the store's views read it now.
std::vector<float> read_views(const ParamStore& s, size_t unit) {
  std::vector<float> out;
  const ParamUnit& u = s.units()[unit];
  for (size_t v = u.first_view; v < u.end_view; ++v) out.insert(out.end(), s.param(v), s.param(v) + s.view(v).numel);
  return out;
}
std::vector<float> expected_views(const ParamStore& s, size_t unit, bool bf16) {
  std::vector<float> out;
  const ParamUnit& u = s.units()[unit];
  for (size_t v = u.first_view; v < u.end_view; ++v)
    for (size_t i = 0; i < s.view(v).numel; ++i) {
      const float x = param_value(s.view(v).offset + i);
      out.push_back(bf16 ? to_float(to_bf16(x)) : x);
    }
  return out;
}

void expect_stage3_gathers(int ranks, Precision wire) {
  SCOPED_TRACE(std::to_string(ranks) + " ranks" + (wire == Precision::Bf16 ? ", bf16" : ""));
  run_ranks(ranks, [&](comm::ProcessGroup& group) {
    ParamStore s;
    declare_store(s);
    for (size_t i = 0; i < s.flat_size(); ++i) s.params()[i] = param_value(i);
    const ShardLayout layout(s, group.rank(), group.size());
    comm::OverlapLedger ledger;
    ParamGatherer gatherer(s, layout, group, ledger, /*sharded=*/true, wire);
    ASSERT_TRUE(s.params().empty()) << "the flat parameters are freed";
    // The shard: the owned elements, then zeros to the slice's end.
    for (const UnitShard& u : layout.units())
      for (size_t j = 0; j < u.slice; ++j)
        ASSERT_EQ(gatherer.shard()[u.local + j], j < u.owned.size() ? param_value(u.owned.begin + j) : 0.0f)
            << "unit " << u.unit << " slice element " << j;
    const bool bf16 = wire == Precision::Bf16;
    for (int pass = 0; pass < 2; ++pass) {  // the second after release_all(): gathered again
      gatherer.gather_whole_step();
      EXPECT_EQ(read_views(s, 0), expected_views(s, 0, bf16));
      EXPECT_EQ(read_views(s, 4), expected_views(s, 4, bf16));
      for (size_t b : {1, 2, 3}) {  // forward order, each prefetching the next
        gatherer.acquire(b, b < 3 ? b + 1 : ParamGatherer::npos);
        EXPECT_EQ(read_views(s, b), expected_views(s, b, bf16)) << "block unit " << b;
        gatherer.release(b);
        EXPECT_EQ(s.param(s.units()[b].first_view), nullptr) << "released: unbound";
      }
      EXPECT_EQ(gatherer.take_gathers_on_demand(), 1u) << "only the first block's gather was not prefetched";
      // Released blocks keep their gathered copies until a buffer is
      // needed; two blocks bound take both buffers, and a third is refused.
      gatherer.acquire(3, 1);  // still there; then blk0 is prefetched over blk1
      gatherer.release(3);
      gatherer.acquire(1, ParamGatherer::npos);
      EXPECT_EQ(read_views(s, 1), expected_views(s, 1, bf16));
      gatherer.acquire(2, ParamGatherer::npos);
      EXPECT_EQ(read_views(s, 2), expected_views(s, 2, bf16));
      EXPECT_EQ(gatherer.take_gathers_on_demand(), 1u) << "blk1's gather";
      EXPECT_THROW(gatherer.acquire(3, ParamGatherer::npos), Error);
      gatherer.release(1);
      gatherer.release(2);
      gatherer.release_all();
      if (group.size() > 1) {
        EXPECT_GT(ledger.settle().busy_s, 0.0) << "the gathers are in the ledger";
      }
      for (size_t v = 0; v < s.views().size(); ++v) EXPECT_EQ(s.param(v), nullptr) << s.view(v).name;
    }
  });
}

TEST(ParamGatherer, Stage3GathersRebuildTheParametersBitwise) {
  for (int ranks : {1, 2, 3, 4}) expect_stage3_gathers(ranks, Precision::Fp32);
}

TEST(ParamGatherer, Stage3Bf16GathersGiveEveryRankTheSameRounding) {
  for (int ranks : {2, 3}) expect_stage3_gathers(ranks, Precision::Bf16);
}

// Stages 1 and 2: each rank's owned elements land in every rank's flat
// buffer, whatever the others held there before.
TEST(ParamGatherer, AllGatherFlatTakesEachElementFromItsOwner) {
  for (int ranks : {1, 2, 3, 4}) {
    SCOPED_TRACE(std::to_string(ranks) + " ranks");
    run_ranks(ranks, [&](comm::ProcessGroup& group) {
      const int r = group.rank();
      ParamStore s;
      declare_store(s);
      const ShardLayout layout(s, r, group.size());
      std::vector<int> owner(s.flat_size(), -1);
      for (int q = 0; q < group.size(); ++q) {
        const ShardLayout theirs(s, q, group.size());
        for (const FlatSegment& seg : theirs.segments())
          for (size_t i = seg.begin; i < seg.end; ++i) owner[i] = q;
      }
      for (size_t i = 0; i < s.flat_size(); ++i) s.params()[i] = owner[i] == r ? param_value(i) + float(r) : -1e9f;
      comm::OverlapLedger ledger;
      ParamGatherer gatherer(s, layout, group, ledger, /*sharded=*/false);
      gatherer.all_gather_flat();
      for (size_t i = 0; i < s.flat_size(); ++i) {
        ASSERT_GE(owner[i], 0) << "element " << i << " has no owner";
        ASSERT_EQ(s.params()[i], param_value(i) + float(owner[i])) << "element " << i;
      }
    });
  }
}

// One backward as ZeroEngine drives it: the blocks in reverse, each written
// into its staging between acquire() and reduce(), the whole-step units'
// into theirs; rank r's gradient is grad_value(r, flat index, pass).
void backward_pass(ParamStore& s, GradReducer& reducer, int r, int pass) {
  auto write = [&](size_t unit) {
    const ParamUnit& u = s.units()[unit];
    for (size_t v = u.first_view; v < u.end_view; ++v)
      for (size_t i = 0; i < s.view(v).numel; ++i) s.grad(v)[i] += grad_value(r, s.view(v).offset + i, pass);
  };
  reducer.start_backward(/*accumulate=*/pass > 0);
  write(4);
  for (size_t b : {3, 2, 1}) {
    reducer.acquire(b);
    write(b);
    reducer.reduce(b);
  }
  write(0);
  reducer.finish_backward();
}

void expect_reduce_scatter(int ranks, Precision wire) {
  SCOPED_TRACE(std::to_string(ranks) + " ranks" + (wire == Precision::Bf16 ? ", bf16" : ""));
  run_ranks(ranks, [&](comm::ProcessGroup& group) {
    const int n = group.size();
    ParamStore s;
    declare_store(s);
    const ShardLayout layout(s, group.rank(), n);
    comm::OverlapLedger ledger;
    GradReducer reducer(s, layout, group, ledger, wire);
    ASSERT_TRUE(s.grads().empty()) << "the flat gradients are freed";
    // Padding between views is never written: it reduces to zero.
    std::vector<bool> in_view(s.flat_size(), false);
    for (const ParamView& v : s.views()) std::fill_n(in_view.begin() + long(v.offset), v.numel, true);
    auto average = [&](size_t i, int pass) {
      if (!in_view[i]) return 0.0f;
      float sum = 0;
      for (int q = 0; q < n; ++q) sum += grad_value(q, i, pass);
      return sum / float(n);
    };
    for (int passes = 1; passes <= 2; ++passes) {  // the second: a later micro-batch adds
      backward_pass(s, reducer, group.rank(), passes - 1);
      if (n > 1) {
        EXPECT_GT(ledger.settle().busy_s, 0.0) << "the reduce-scatters are in the ledger";
      }
      for (const UnitShard& u : layout.units())
        for (size_t j = 0; j < u.slice; ++j) {
          float want = 0;
          if (j < u.owned.size())
            for (int p = 0; p < passes; ++p) want += average(u.owned.begin + j, p);
          ASSERT_EQ(reducer.shard()[u.local + j], want) << "unit " << u.unit << " slice element " << j
                                                         << " after " << passes << " passes";
        }
    }
  });
}

TEST(GradReducer, EachRankGetsTheAverageOfItsSlice) {
  for (int ranks : {1, 2, 3, 4}) expect_reduce_scatter(ranks, Precision::Fp32);
}

TEST(GradReducer, Bf16WireAveragesTheSame) {
  for (int ranks : {2, 3}) expect_reduce_scatter(ranks, Precision::Bf16);
}

// ----- ZeroEngine: a small GPT's steps against one process's -----------------

const GptConfig kGpt{.n_layer = 2, .n_embd = 16, .n_head = 2, .block_size = 8, .vocab_size = 32};
constexpr int64_t kRankBatch = 2;  // sequences per rank
constexpr int kSteps = 2;
const float kLr[kSteps] = {1e-2f, 5e-3f};
// eps 1e-4: an element whose gradient is ~0 would turn rounding noise into
// a full step of +-lr under Adam's g / sqrt(v); eps bounds that.
const OptimizerConfig kAdamW{.kind = OptimizerKind::AdamW, .weight_decay = 0.1, .eps = 1e-4};

// Sequences [first, first + count) of a fixed token stream.
Batch gpt_batch(int64_t first, int64_t count) {
  Batch b;
  b.batch_size = count;
  b.seq_len = kGpt.block_size;
  const size_t n = size_t(count * kGpt.block_size);
  b.tokens.ensure(n);
  b.targets.ensure(n);
  for (size_t i = 0; i < n; ++i) {
    const size_t g = size_t(first * kGpt.block_size) + i;
    b.tokens[i] = int32_t((g * 7 + g / 5) % 32);
    b.targets[i] = int32_t((g * 7 + g / 5 + 3) % 32);
  }
  return b;
}

std::vector<float> solo_gpt_params(int ranks, std::vector<double>& squares) {
  Gpt gpt(kGpt);
  Rng rng(5);
  gpt.init_parameters(rng);
  ParamStore& s = gpt.store();
  auto optimizer = make_optimizer(kAdamW, s);
  const Batch batch = gpt_batch(0, kRankBatch * ranks);
  for (int t = 0; t < kSteps; ++t) {
    s.zero_grads();
    gpt.forward(batch);
    gpt.backward();
    double sq = 0;
    for (float g : s.grads()) sq += double(g) * double(g);
    squares.push_back(sq);
    optimizer->step(s, kLr[t]);
  }
  return {s.params().begin(), s.params().end()};
}

// Tolerance: the ranks' gradients are averaged in another order than one
// process sums its batch (relative ~1e-6); two Adam steps of lr <= 1e-2 turn
// that into parameter differences below 1e-5 (measured: < 1e-6).
constexpr float kParamTolerance = 1e-5f;

void expect_zero_steps_like_solo(int stage, int ranks) {
  SCOPED_TRACE("stage " + std::to_string(stage) + ", " + std::to_string(ranks) + " ranks");
  std::vector<double> solo_squares;
  const std::vector<float> solo = solo_gpt_params(ranks, solo_squares);
  // Per rank: the parameters it holds after the steps (stage 3: its owned
  // elements, NaN elsewhere; stages 1 and 2: all, gathered).
  std::vector<std::vector<float>> held(static_cast<size_t>(ranks));
  std::vector<std::vector<double>> squares(static_cast<size_t>(ranks));
  run_ranks(ranks, [&](comm::ProcessGroup& group) {
    // One OpenMP thread per rank (a setting of this thread's own): three
    // ranks' teams would spin against each other on two cores.
    omp_set_num_threads(1);
    const int r = group.rank();
    Gpt gpt(kGpt);
    Rng rng(5);
    gpt.init_parameters(rng);
    ParamStore& s = gpt.store();
    ZeroEngine zero(s, group, stage);
    auto optimizer = make_optimizer(kAdamW, s, zero.layout().segments());
    const Batch batch = gpt_batch(kRankBatch * r, kRankBatch);
    for (int t = 0; t < kSteps; ++t) {
      s.zero_grads();
      zero.begin_step();
      gpt.forward(batch);
      gpt.backward();
      if (stage == 1) group.all_reduce(s.grads(), comm::ReduceKind::Avg);  // GradientSync's part
      zero.finish_backward();
      squares[size_t(r)].push_back(stage == 1 ? 0.0 : zero.grad_squared_norm_local());
      optimizer->update(zero.update_buffers(), kLr[t]);
      zero.after_update();
    }
    std::vector<float>& mine = held[size_t(r)];
    if (stage < 3) {
      mine.assign(s.params().begin(), s.params().end());
      return;
    }
    mine.assign(s.flat_size(), NAN);
    for (const FlatSegment& seg : zero.layout().segments())
      std::memcpy(mine.data() + seg.begin, zero.param_shard().data() + seg.local, seg.size() * sizeof(float));
  });
  float worst = 0;
  size_t covered = 0;
  for (size_t i = 0; i < solo.size(); ++i)
    for (int r = 0; r < ranks; ++r) {
      const float got = held[size_t(r)][i];
      if (std::isnan(got)) continue;
      ++covered;
      worst = std::max(worst, std::abs(got - solo[i]));
    }
  EXPECT_EQ(covered, solo.size() * size_t(stage == 3 ? 1 : ranks)) << "stage 3: the owned segments tile the store";
  EXPECT_LE(worst, kParamTolerance);
  if (stage >= 2)
    for (int t = 0; t < kSteps; ++t) {  // the shards' squares add up to the whole gradient's
      double sum = 0;
      for (int r = 0; r < ranks; ++r) sum += squares[size_t(r)][size_t(t)];
      EXPECT_NEAR(sum, solo_squares[size_t(t)], 1e-5 * solo_squares[size_t(t)]) << "step " << t;
    }
}

TEST(ZeroEngine, StepsOfAGptOverThreeRanksAreTheSoloAdamWSteps) {
  // The reference on one OpenMP thread too: a team left waiting on this
  // thread spins against the ranks (1.5 s instead of 0.1 s on two cores).
  const int before = omp_get_max_threads();
  omp_set_num_threads(1);
  for (int stage : {1, 2, 3}) expect_zero_steps_like_solo(stage, 3);
  omp_set_num_threads(before);
}

// ----- ZeroEngine: stage 3's prefetch ---------------------------------------

// One step's block entries, as the store's UnitObserver sees them: micro-
// batch m's forward or backward of the blocks (units 1-3).
struct Entry {
  int micro_batch;
  UnitPass pass;
};
const std::vector<Entry> kOneAfterTheOther{{0, UnitPass::Forward}, {0, UnitPass::Backward},
                                           {1, UnitPass::Forward}, {1, UnitPass::Backward}};
const std::vector<Entry> kGPipe{{0, UnitPass::Forward}, {1, UnitPass::Forward}, {2, UnitPass::Forward},
                                {0, UnitPass::Backward}, {1, UnitPass::Backward}, {2, UnitPass::Backward}};
// 1F1B on the first of two stages: one warm-up forward, then alternating.
const std::vector<Entry> kOneFOneB{{0, UnitPass::Forward}, {1, UnitPass::Forward}, {0, UnitPass::Backward},
                                   {2, UnitPass::Forward}, {1, UnitPass::Backward}, {2, UnitPass::Backward}};

// Runs one step of `order` on the engine, checking every bound block's
// parameters and that its communication was accounted; returns the step's
// gathers on demand.
size_t stage3_step(ZeroEngine& zero, const ParamStore& s, const std::vector<Entry>& order) {
  zero.begin_step();
  int backwards = 0;
  for (const Entry& e : order) {
    const bool forward = e.pass == UnitPass::Forward;
    if (!forward && backwards++ > 0) zero.begin_next_micro_batch();
    for (size_t i = 0; i < 3; ++i) {
      const size_t b = forward ? 1 + i : 3 - i;
      zero.before_unit(b, e.pass);
      EXPECT_EQ(read_views(s, b), expected_views(s, b, false)) << "block unit " << b;
      zero.after_unit(b, e.pass);
    }
    if (!forward) zero.finish_backward();
  }
  const ZeroCommunication comm = zero.communication();
  EXPECT_GT(comm.time.busy_s, 0.0) << "the step's gathers and reduce-scatters";
  EXPECT_GT(comm.time.exposed_s, 0.0) << "host-staged waits block: some time is exposed";
  zero.after_update();
  EXPECT_TRUE(comm.gathers_on_demand.has_value()) << "stage 3 counts them";
  return comm.gathers_on_demand.value_or(99);
}

TEST(ZeroEngine, Stage3PrefetchFollowsTheLastStepsOrderSoNoBlockWaitsForItsGatherAfterTheFirstStep) {
  run_ranks(2, [](comm::ProcessGroup& group) {
    ParamStore s;
    declare_store(s);
    for (size_t i = 0; i < s.flat_size(); ++i) s.params()[i] = param_value(i);
    ZeroEngine zero(s, group, 3);
    // The store's order misses the first block of each step; under GPipe
    // also each later micro-batch's first forward block and first backward
    // one. The last step's order misses none.
    EXPECT_EQ(stage3_step(zero, s, kOneAfterTheOther), 1u);
    EXPECT_EQ(stage3_step(zero, s, kOneAfterTheOther), 0u);
    // Evaluation (forwards only) neither counts nor disturbs the record.
    zero.begin_evaluation();
    for (size_t b : {1, 2, 3}) {
      zero.before_unit(b, UnitPass::Forward);
      EXPECT_EQ(read_views(s, b), expected_views(s, b, false));
      zero.after_unit(b, UnitPass::Forward);
    }
    zero.end_evaluation();
    EXPECT_EQ(stage3_step(zero, s, kOneAfterTheOther), 0u);
    // Another schedule: its first step leaves the record and falls back to
    // the store's order; the next follows it.
    EXPECT_EQ(stage3_step(zero, s, kGPipe), 4u);  // the two later micro-batches'; the step's first was on record
    EXPECT_EQ(stage3_step(zero, s, kGPipe), 0u);
    EXPECT_EQ(stage3_step(zero, s, kGPipe), 0u);
    EXPECT_GT(stage3_step(zero, s, kOneFOneB), 0u);
    EXPECT_EQ(stage3_step(zero, s, kOneFOneB), 0u);
  });
}

TEST(ZeroEngine, RejectsAStageOutsideOneToThreeLeavingTheStoreWhole) {
  run_ranks(2, [](comm::ProcessGroup& group) {
    ParamStore s;
    declare_store(s);
    for (int stage : {0, 4}) {
      EXPECT_THROW(ZeroEngine(s, group, stage), Error) << stage;
      EXPECT_EQ(s.params().size(), s.flat_size()) << "stage " << stage << ": the flat parameters are kept";
      EXPECT_EQ(s.grads().size(), s.flat_size()) << "stage " << stage << ": the flat gradients are kept";
    }
  });
}

}  // namespace
}  // namespace meshtrain::parallel
