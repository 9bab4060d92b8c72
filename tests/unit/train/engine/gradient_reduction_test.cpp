// Each GradientReduction (gradient_reduction.hpp) against the solo one, with
// threads as ranks over the in-process transport, driven in the order
// run_train_step calls it (train_step.cpp): begin_step, per micro-batch
// begin_micro_batch / forward / backward / end_micro_batch, finish_backward,
// gradients() scaled by 1/M, update (AdamW), then an evaluation forward.
//
// The model is a toy over a ParamStore with two whole-step units and two
// blocks. Its backward writes gradients that are small multiples of 3/64:
// every sum over ranks and micro-batches is exact, and so is its division by
// 1-4 ranks (and by M = 2). So every strategy, whatever order its
// collectives add in, must give the solo run's gradients and parameters to
// the bit, ZeRO included, and under the bf16 wire too (the values need at
// most 8 significant bits). A difference is bookkeeping (a shard, a bind, an
// average, a padding element), not rounding. What is not exact is ZeRO-3
// with bf16 parameter gathers: its forward reads the parameters rounded to
// bf16, which the test checks for exactly that rounding.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <exception>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "meshtrain/comm/group/process_group.hpp"
#include "meshtrain/comm/transport/inproc/inproc_transport.hpp"
#include "meshtrain/core/bf16.hpp"
#include "meshtrain/core/param_store.hpp"
#include "meshtrain/optim/factory.hpp"
#include "meshtrain/parallel/data_parallel/gradient_sync.hpp"
#include "meshtrain/parallel/zero/zero_engine.hpp"
#include "meshtrain/train/engine/gradient_reduction.hpp"
#include "thread_ranks.hpp"

namespace meshtrain {
namespace {

constexpr int kSteps = 2;
const float kLr[kSteps] = {0.05f, 0.02f};
const float kNan = std::numeric_limits<float>::quiet_NaN();

// Units: [emb 37, emb.b 5] whole-step; blk0 {w (3, 41), b 7}; blk1 {w 130,
// b 3}; [head 21] whole-step. Over 3 ranks the first unit (64 elements) cuts
// into slices of 32: rank 2 owns none of it.
void declare_toy(ParamStore& s) {
  s.declare("emb", {37}, true);
  s.declare("emb.b", {5}, false);
  s.begin_unit("blk0");
  s.declare("blk0.w", {3, 41}, true);
  s.declare("blk0.b", {7}, false);
  s.end_unit();
  s.begin_unit("blk1");
  s.declare("blk1.w", {130}, true);
  s.declare("blk1.b", {3}, false);
  s.end_unit();
  s.declare("head", {21}, true);
  s.allocate();
  for (const ParamView& v : s.views())
    for (size_t i = 0; i < v.numel; ++i)
      s.params()[v.offset + i] = float(int((v.offset + i) * 37 % 101) - 50) / 64.0f;
}

// Rank r's gradient for element i of view v at micro-batch m of step t: a
// multiple of 3/64 in [-24/64, 24/64].
float toy_grad(int r, int64_t m, int t, size_t v, size_t i) {
  const int k = int((size_t(r) * 5 + size_t(m) * 3 + size_t(t) * 7 + v * 11 + i * 13) % 17) - 8;
  return 3.0f * float(k) / 64.0f;
}

// What one rank (or the solo run) saw and ended with, in the flat layout;
// NaN where it holds nothing.
struct Record {
  std::vector<float> seen_forward[kSteps + 1];  // the parameters forward read (step kSteps: evaluation)
  std::vector<float> seen_backward[kSteps];
  std::vector<float> grads[kSteps];   // the held gradients after the 1/M scale
  double squares[kSteps] = {};        // sum of squares of everything held (padding included)
  std::vector<float> params;          // the owned (or whole) parameters after the last step
  bool data_sharded = false;
  StepCommunication comm[kSteps];     // what each step's communication() said
};

std::vector<float> nans(const ParamStore& s) { return std::vector<float>(s.flat_size(), kNan); }

// The toy's passes. `grad(v, i)` is what backward adds to element i of view v.
void copy_params(const ParamStore& s, size_t unit, std::vector<float>& seen) {
  const ParamUnit& u = s.units()[unit];
  for (size_t v = u.first_view; v < u.end_view; ++v)
    std::memcpy(seen.data() + s.view(v).offset, s.param(v), s.view(v).numel * sizeof(float));
}

void forward(ParamStore& s, std::vector<float>& seen) {
  for (size_t u = 0; u < s.units().size(); ++u) {
    if (s.units()[u].whole_step) {
      copy_params(s, u, seen);
    } else {
      UnitScope scope(s, u, UnitPass::Forward);
      copy_params(s, u, seen);
    }
  }
}

template <typename Grad>
void backward(ParamStore& s, std::vector<float>& seen, const Grad& grad) {
  auto add = [&](size_t unit) {
    const ParamUnit& u = s.units()[unit];
    for (size_t v = u.end_view; v-- > u.first_view;) {
      float* g = s.grad(v);
      for (size_t i = 0; i < s.view(v).numel; ++i) g[i] += grad(v, i);
      s.grad_ready(v);  // announced in backward order, as the layers do
    }
  };
  for (size_t u = s.units().size(); u-- > 0;) {
    if (s.units()[u].whole_step) {
      copy_params(s, u, seen);
      add(u);
    } else {
      UnitScope scope(s, u, UnitPass::Backward);
      copy_params(s, u, seen);
      add(u);
    }
  }
}

OptimizerConfig adamw() { return {.kind = OptimizerKind::AdamW, .weight_decay = 0.1}; }

// The flat layout's view of what a rank holds (held_parts), NaN elsewhere;
// and the squares of all of it, as train_step's norm takes them.
void record_held(const ParamStore& s, const HeldGradients& held, Record& rec, int t) {
  rec.grads[t] = nans(s);
  for (const ParamView& v : s.views())
    for (const HeldPart& p : held_parts(held, v))
      std::memcpy(rec.grads[t].data() + v.offset + p.view_offset, p.values.data(), p.values.size_bytes());
  double sq = 0;
  for (float x : held.values) sq += double(x) * double(x);
  rec.squares[t] = sq;
  rec.data_sharded = held.data_sharded;
}

// The solo reference: one process with the global batch, whose micro-batch
// m's gradient is the mean of the ranks' shares: (sum over r) / ranks.
Record run_solo(int ranks, int64_t micro_batches) {
  ParamStore s;
  declare_toy(s);
  auto gradients = solo_gradients(s);
  auto optimizer = make_optimizer(adamw(), s);
  Record rec;
  for (int t = 0; t < kSteps; ++t) {
    rec.seen_forward[t] = nans(s);
    rec.seen_backward[t] = nans(s);
    gradients->begin_step();
    for (int64_t m = 0; m < micro_batches; ++m) {
      gradients->begin_micro_batch(m, m == micro_batches - 1);
      forward(s, rec.seen_forward[t]);
      backward(s, rec.seen_backward[t], [&](size_t v, size_t i) {
        float sum = 0;
        for (int r = 0; r < ranks; ++r) sum += toy_grad(r, m, t, v, i);
        return sum / float(ranks);
      });
      gradients->end_micro_batch();
    }
    gradients->finish_backward();
    HeldGradients held = gradients->gradients();
    for (float& g : held.values) g *= 1.0f / float(micro_batches);
    record_held(s, held, rec, t);
    gradients->update(*optimizer, kLr[t]);
  }
  rec.seen_forward[kSteps] = nans(s);
  gradients->begin_evaluation();
  forward(s, rec.seen_forward[kSteps]);
  gradients->end_evaluation();
  rec.params.assign(s.params().begin(), s.params().end());
  return rec;
}

// zero_stage 0: plain data parallelism (AllReduceGradients); 1-3: ZeRO.
struct Strategy {
  int zero_stage = 0;
  Precision wire = Precision::Fp32;
};

// One rank's run of the same steps, its share of each micro-batch's gradients
// its own (toy_grad(rank, ...)).
Record run_rank(comm::ProcessGroup& group, Strategy how, int64_t micro_batches) {
  const int rank = group.rank();
  ParamStore s;
  declare_toy(s);
  std::unique_ptr<parallel::GradientSync> sync;
  std::unique_ptr<parallel::ZeroEngine> zero;
  std::unique_ptr<Optimizer> optimizer;
  std::unique_ptr<GradientReduction> gradients;
  if (how.zero_stage <= 1)  // buckets of 64 bytes and up: several, so several all-reduces overlap backward
    sync = std::make_unique<parallel::GradientSync>(
        s, group, parallel::GradientSyncOptions{.bucket_bytes = 256, .first_bucket_bytes = 64, .dtype = how.wire});
  if (how.zero_stage == 0) {
    optimizer = make_optimizer(adamw(), s);
    gradients = all_reduce_gradients(s, *sync);
  } else {
    zero = std::make_unique<parallel::ZeroEngine>(s, group, how.zero_stage, how.wire);
    optimizer = make_optimizer(adamw(), s, zero->layout().segments());
    gradients = zero_gradients(s, *zero, sync.get());
  }
  Record rec;
  for (int t = 0; t < kSteps; ++t) {
    rec.seen_forward[t] = nans(s);
    rec.seen_backward[t] = nans(s);
    gradients->begin_step();
    for (int64_t m = 0; m < micro_batches; ++m) {
      gradients->begin_micro_batch(m, m == micro_batches - 1);
      forward(s, rec.seen_forward[t]);
      backward(s, rec.seen_backward[t], [&](size_t v, size_t i) { return toy_grad(rank, m, t, v, i); });
      gradients->end_micro_batch();
    }
    gradients->finish_backward();
    HeldGradients held = gradients->gradients();
    for (float& g : held.values) g *= 1.0f / float(micro_batches);
    record_held(s, held, rec, t);
    gradients->update(*optimizer, kLr[t]);
    rec.comm[t] = gradients->communication();
  }
  rec.seen_forward[kSteps] = nans(s);
  gradients->begin_evaluation();
  forward(s, rec.seen_forward[kSteps]);
  gradients->end_evaluation();
  if (how.zero_stage == 3) {  // the rank's shard only: its owned segments
    rec.params = nans(s);
    const std::span<float> shard = zero->param_shard();
    for (const FlatSegment& seg : zero->layout().segments())
      std::memcpy(rec.params.data() + seg.begin, shard.data() + seg.local, seg.size() * sizeof(float));
  } else {
    rec.params.assign(s.params().begin(), s.params().end());
  }
  return rec;
}

std::vector<Record> run_ranks(int ranks, Strategy how, int64_t micro_batches) {
  std::vector<Record> records(static_cast<size_t>(ranks));
  testing::on_inproc_ranks(ranks, [&](int r, comm::ProcessGroup& group) {
    records[size_t(r)] = run_rank(group, how, micro_batches);
  });
  return records;
}

// Where `got` holds a value (not NaN) it must be `want`'s bits; returns the
// number of elements compared. `round`: want rounded to bf16 first.
size_t expect_bits(const std::vector<float>& got, const std::vector<float>& want, const std::string& what,
                   bool round = false) {
  EXPECT_EQ(got.size(), want.size()) << what;
  size_t compared = 0, reported = 0;
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    if (std::isnan(got[i])) continue;
    ++compared;
    const float w = round ? to_float(to_bf16(want[i])) : want[i];
    if (std::memcmp(&got[i], &w, sizeof(float)) != 0 && reported++ < 3)
      ADD_FAILURE() << what << ": flat element " << i << " is " << got[i] << ", the solo run's " << w;
  }
  return compared;
}

// Elements of views (not padding) in the flat layout.
size_t view_elements(const ParamStore& s) {
  size_t n = 0;
  for (const ParamView& v : s.views()) n += v.numel;
  return n;
}

void expect_like_solo(Strategy how, int ranks, int64_t micro_batches) {
  const std::string run = "stage " + std::to_string(how.zero_stage) + (how.wire == Precision::Bf16 ? " bf16" : "") +
                          ", " + std::to_string(ranks) + " ranks, M = " + std::to_string(micro_batches);
  SCOPED_TRACE(run);
  const Record solo = run_solo(ranks, micro_batches);
  const std::vector<Record> recs = run_ranks(ranks, how, micro_batches);
  ParamStore layout;
  declare_toy(layout);
  const size_t elements = view_elements(layout);
  const bool sharded = how.zero_stage >= 2;
  const bool bf16_params = how.zero_stage == 3 && how.wire == Precision::Bf16;
  for (int t = 0; t < kSteps; ++t) {
    SCOPED_TRACE("step " + std::to_string(t));
    size_t held = 0;
    double squares = 0;
    for (int r = 0; r < ranks; ++r) {
      const Record& rec = recs[size_t(r)];
      const std::string who = "rank " + std::to_string(r);
      EXPECT_EQ(rec.data_sharded, sharded) << who;
      // Every view element is seen in forward and backward, equal to the solo
      // run's (stage 3 with bf16 gathers: its bf16 rounding).
      EXPECT_EQ(expect_bits(rec.seen_forward[t], solo.seen_forward[t], who + " forward", bf16_params), elements);
      EXPECT_EQ(expect_bits(rec.seen_backward[t], solo.seen_backward[t], who + " backward", bf16_params), elements);
      held += expect_bits(rec.grads[t], solo.grads[t], who + " gradients");
      squares += rec.squares[t];
    }
    // Sharded: the ranks' parts tile the views, and their squares (padding
    // included: it must be zero) add up to the solo run's norm. Whole: each
    // rank holds everything.
    EXPECT_EQ(held, sharded ? elements : elements * size_t(ranks));
    EXPECT_EQ(squares, sharded ? solo.squares[t] : solo.squares[t] * ranks);
    // The overlap report: every strategy's collectives took time; ZeRO-3
    // alone counts gathers on demand, none once its prefetch has the first
    // step's order.
    for (int r = 0; r < ranks; ++r) {
      const StepCommunication& comm = recs[size_t(r)].comm[t];
      if (ranks > 1) {
        EXPECT_GT(comm.time.busy_s, 0.0) << "rank " << r;
      }
      ASSERT_EQ(comm.gathers_on_demand.has_value(), how.zero_stage == 3) << "rank " << r;
      if (how.zero_stage == 3 && t > 0) {
        EXPECT_EQ(*comm.gathers_on_demand, 0u) << "rank " << r;
      }
    }
  }
  size_t owned = 0;
  for (int r = 0; r < ranks; ++r) {
    const std::string who = "rank " + std::to_string(r);
    EXPECT_EQ(expect_bits(recs[size_t(r)].seen_forward[kSteps], solo.seen_forward[kSteps], who + " evaluation",
                          bf16_params),
              elements);
    owned += expect_bits(recs[size_t(r)].params, solo.params, who + " parameters after the steps");
  }
  // Stage 3 keeps only the owned elements, which tile the store.
  EXPECT_EQ(owned, how.zero_stage == 3 ? layout.flat_size() : layout.flat_size() * size_t(ranks));
}

TEST(GradientReduction, SoloRecordsWhatBackwardWrote) {
  // The reference itself: one rank, one micro-batch, gradients as written,
  // and the updates moved the parameters (all but those whose gradient and
  // decay were zero at both steps).
  const Record solo = run_solo(1, 1);
  ParamStore s;
  declare_toy(s);
  size_t moved = 0;
  for (size_t v = 0; v < s.views().size(); ++v)
    for (size_t i = 0; i < s.view(v).numel; ++i) {
      const size_t f = s.view(v).offset + i;
      ASSERT_EQ(solo.grads[0][f], toy_grad(0, 0, 0, v, i)) << s.view(v).name << " " << i;
      ASSERT_EQ(solo.grads[1][f], toy_grad(0, 0, 1, v, i)) << s.view(v).name << " " << i;
      moved += solo.params[f] != s.params()[f];
    }
  EXPECT_GT(moved, view_elements(s) * 9 / 10);
  EXPECT_FALSE(solo.data_sharded);
}

TEST(GradientReduction, AllReduceIsTheSoloStepBitwise) {
  for (int ranks : {1, 2, 3})
    for (int64_t m : {1, 2}) expect_like_solo({.zero_stage = 0}, ranks, m);
}

TEST(GradientReduction, Zero1IsTheSoloStepBitwise) {
  for (int ranks : {2, 3, 4})
    for (int64_t m : {1, 2}) expect_like_solo({.zero_stage = 1}, ranks, m);
}

TEST(GradientReduction, Zero2IsTheSoloStepBitwise) {
  for (int ranks : {1, 2, 3, 4})
    for (int64_t m : {1, 2}) expect_like_solo({.zero_stage = 2}, ranks, m);
}

TEST(GradientReduction, Zero3IsTheSoloStepBitwise) {
  for (int ranks : {1, 2, 3, 4})
    for (int64_t m : {1, 2}) expect_like_solo({.zero_stage = 3}, ranks, m);
}

// The bf16 wire: gradients of <= 8 significant bits travel exactly; stage 3
// computes with the parameters rounded to bf16 and updates the fp32 shard.
TEST(GradientReduction, ZeroOverTheBf16WireIsTheSoloStep) {
  for (int stage : {1, 2, 3})
    for (int64_t m : {1, 2}) expect_like_solo({.zero_stage = stage, .wire = Precision::Bf16}, 3, m);
}

}  // namespace
}  // namespace meshtrain
