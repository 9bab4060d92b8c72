// Optimizers over ZeRO segments: ranks that each update their own segments
// of the flat layout (parameters and gradients flat, or in the shard layout)
// end with the same parameters and state as one optimizer over the whole
// store, bitwise for the elementwise optimizers (SGD, AdamW) and within
// rounding for LAMB and LARS once the per-view norm sums are summed over the
// ranks. And the chunks (chunks.hpp) that a segment list cuts.
#include <gtest/gtest.h>

#include <algorithm>
#include <barrier>
#include <cmath>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "meshtrain/core/error.hpp"
#include "meshtrain/core/flat_segment.hpp"
#include "meshtrain/core/param_store.hpp"
#include "meshtrain/core/rng.hpp"
#include "meshtrain/optim/chunks.hpp"
#include "meshtrain/optim/factory.hpp"
#include "meshtrain/optim/lamb.hpp"
#include "meshtrain/optim/lars.hpp"

namespace meshtrain {
namespace {

constexpr int kSteps = 4;
const float kLr[kSteps] = {0.01f, 0.02f, 0.015f, 0.005f};

// Odd sizes that cross kUpdateChunkElems inside views, decayed and undecayed
// views, and units: [emb, emb.bias] whole-step, u0, u1, [head] whole-step.
void declare_store(ParamStore& s) {
  s.declare("emb", {5000}, true);
  s.declare("emb.bias", {37}, false);
  s.begin_unit("u0");
  s.declare("u0.w", {4096 * 2 + 3}, true);
  s.declare("u0.b", {37}, false);
  s.declare("u0.w2", {3, 1001}, true);
  s.end_unit();
  s.begin_unit("u1");
  s.declare("u1.w", {5000}, true);
  s.declare("u1.ln", {19}, false);
  s.end_unit();
  s.declare("head", {4099}, true);
  s.allocate();
}

// Rank `rank`'s segments under the unit-by-unit split of
// parallel::ShardLayout (shard_layout.hpp; the optim layer cannot link
// parallel, so the rule is restated here and ShardLayout is checked against
// it in tests/unit/parallel/zero/shard_layout_test.cpp): each unit is cut into
// `world` slices of the smallest multiple of 16 elements that covers it,
// slice `rank` is owned, and the shard buffers hold the slices back to back.
FlatSegments unit_sliced_segments(const ParamStore& s, int rank, int world) {
  FlatSegments segs;
  size_t local = 0;
  for (const ParamUnit& u : s.units()) {
    const size_t slice = ((u.size() + size_t(world) - 1) / size_t(world) + 15) / 16 * 16;
    const size_t lo = std::min(u.end, u.begin + size_t(rank) * slice), hi = std::min(u.end, lo + slice);
    if (hi > lo) segs.push_back({.begin = lo, .end = hi, .local = local});
    local += slice;
  }
  return segs;
}

// An even split of the whole flat range at unaligned cuts (inside views and
// inside chunks), one segment per rank.
FlatSegments even_split_segments(const ParamStore& s, int rank, int world) {
  const size_t n = s.flat_size();
  return {{.begin = n * size_t(rank) / size_t(world), .end = n * size_t(rank + 1) / size_t(world), .local = 0}};
}

// A store with random parameters whose scale grows along each view, and
// gradients for kSteps steps whose scale shrinks along it (so the two halves
// of a view have clearly different norms). Gradient padding is NaN: an
// optimizer that touched padding would show it.
struct Problem {
  ParamStore store;
  std::vector<float> init;                // flat parameters
  std::vector<std::vector<float>> grads;  // [step][flat]

  Problem() {
    declare_store(store);
    Rng rng(1234);
    init.assign(store.flat_size(), 0.0f);
    grads.assign(kSteps, std::vector<float>(store.flat_size(), NAN));
    for (const ParamView& v : store.views())
      for (size_t j = 0; j < v.numel; ++j) {
        const float ramp = float(j) / float(v.numel);
        init[v.offset + j] = rng.normal() * (0.5f + 2.0f * ramp);
        for (int k = 0; k < kSteps; ++k) grads[k][v.offset + j] = rng.normal() * (2.5f - 2.0f * ramp) * (1 + 0.1f * k);
      }
  }
};

// The whole-store optimizer's result: parameters and state, flat.
struct Result {
  std::vector<float> params;
  std::map<std::string, std::vector<float>> state;  // flat layout
  std::vector<double> trust;                         // LAMB / LARS: last trust ratios
};

size_t view_index(const ParamStore& s, const char* name) { return size_t(s.find(name) - s.views().data()); }

std::vector<double> trust_of(Optimizer& opt) {
  if (auto* lamb = dynamic_cast<Lamb*>(&opt)) return lamb->last_trust_ratios();
  if (auto* lars = dynamic_cast<Lars*>(&opt)) return lars->last_trust_ratios();
  return {};
}

Result run_whole(const Problem& p, const OptimizerConfig& config) {
  ParamStore s;
  declare_store(s);
  std::copy(p.init.begin(), p.init.end(), s.params().begin());
  auto opt = make_optimizer(config, s);
  for (int k = 0; k < kSteps; ++k) {
    std::copy(p.grads[k].begin(), p.grads[k].end(), s.grads().begin());
    opt->step(s, kLr[k]);
  }
  Result r{{s.params().begin(), s.params().end()}, {}, trust_of(*opt)};
  for (auto& [name, buf] : opt->state_buffers()) r.state[name] = buf->to_host();
  return r;
}

// Sums each rank's partial view sums over the ranks, in rank order, in place
// on every rank: what the trainer's all-reduce does, for ranks on threads.
class SumOverRanks {
 public:
  explicit SumOverRanks(int world) : parts_(static_cast<size_t>(world)), barrier_(world) {}
  void operator()(int rank, std::span<double> sums) {
    parts_[size_t(rank)].assign(sums.begin(), sums.end());
    barrier_.arrive_and_wait();
    for (size_t i = 0; i < sums.size(); ++i) {
      double total = 0;
      for (const auto& part : parts_) total += part[i];
      sums[i] = total;
    }
    barrier_.arrive_and_wait();  // nobody overwrites its part before all have read
  }

 private:
  std::vector<std::vector<double>> parts_;
  std::barrier<> barrier_;
};

struct Sharded {
  std::vector<float> params;                        // flat, the owned segments written back
  std::vector<std::unique_ptr<Optimizer>> ranks;    // their state is in the shard layout
};

// Every rank updates its segments for kSteps steps; the ranks run on threads
// (so a view-sum reducer can meet them in the middle of update()).
Sharded run_sharded(const Problem& p, const OptimizerConfig& config, const std::vector<FlatSegments>& segs,
                    bool params_in_shard, bool grads_in_shard, bool reduce_view_sums) {
  const int world = int(segs.size());
  Sharded out{p.init, {}};
  SumOverRanks sum(world);
  for (int r = 0; r < world; ++r) {
    out.ranks.push_back(make_optimizer(config, p.store, segs[size_t(r)]));
    if (reduce_view_sums) out.ranks.back()->set_view_sum_reducer([&sum, r](std::span<double> s) { sum(r, s); });
  }
  std::vector<std::exception_ptr> errors(static_cast<size_t>(world));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      try {
        const FlatSegments& mine = segs[size_t(r)];
        Optimizer& opt = *out.ranks[size_t(r)];
        std::vector<float> shard_params(opt.local_size()), shard_grads(opt.local_size());
        if (params_in_shard)
          for (const FlatSegment& s : mine)
            std::copy(p.init.begin() + long(s.begin), p.init.begin() + long(s.end), shard_params.begin() + long(s.local));
        for (int k = 0; k < kSteps; ++k) {
          if (grads_in_shard)
            for (const FlatSegment& s : mine)
              std::copy(p.grads[k].begin() + long(s.begin), p.grads[k].begin() + long(s.end),
                        shard_grads.begin() + long(s.local));
          opt.update({.params = params_in_shard ? shard_params.data() : out.params.data(),
                      .params_in_shard = params_in_shard,
                      .grads = grads_in_shard ? shard_grads.data() : p.grads[k].data(),
                      .grads_in_shard = grads_in_shard},
                     kLr[k]);
        }
        if (params_in_shard)  // segments are disjoint: no two threads write one element
          for (const FlatSegment& s : mine)
            std::copy(shard_params.begin() + long(s.local), shard_params.begin() + long(s.local + s.size()),
                      out.params.begin() + long(s.begin));
      } catch (...) {
        errors[size_t(r)] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  for (auto& opt : out.ranks) opt->set_view_sum_reducer(nullptr);  // `sum` dies here
  return out;
}

std::vector<FlatSegments> split(const ParamStore& s, FlatSegments (*how)(const ParamStore&, int, int), int world) {
  std::vector<FlatSegments> segs;
  for (int r = 0; r < world; ++r) segs.push_back(how(s, r, world));
  return segs;
}

struct Split {
  const char* name;
  FlatSegments (*how)(const ParamStore&, int, int);
  int world;
};
const Split kSplits[] = {{"unit-sliced", unit_sliced_segments, 2},
                         {"unit-sliced", unit_sliced_segments, 3},
                         {"even", even_split_segments, 3}};

// (params_in_shard, grads_in_shard): ZeRO-1, ZeRO-2, ZeRO-3.
const std::pair<bool, bool> kModes[] = {{false, false}, {false, true}, {true, true}};

size_t first_difference(const std::vector<float>& a, const std::vector<float>& b) {
  for (size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) return i;
  return a.size();
}

OptimizerConfig adamw_config() {
  OptimizerConfig c;
  c.kind = OptimizerKind::AdamW;
  c.weight_decay = 0.1;
  return c;
}
OptimizerConfig sgd_config(bool nesterov) {
  OptimizerConfig c;
  c.kind = OptimizerKind::Sgd;
  c.momentum = 0.9;
  c.nesterov = nesterov;
  c.weight_decay = 0.01;
  return c;
}
OptimizerConfig lamb_config() {
  OptimizerConfig c;
  c.kind = OptimizerKind::Lamb;
  c.weight_decay = 0.05;
  return c;
}
OptimizerConfig lars_config() {
  OptimizerConfig c;
  c.kind = OptimizerKind::Lars;
  c.momentum = 0.9;
  c.weight_decay = 0.01;
  c.trust_coefficient = 0.02;
  return c;
}

// ----- (a) elementwise optimizers: bitwise equal to the whole store ----------

TEST(ShardedUpdate, ElementwiseOptimizersMatchTheWholeStoreBitwise) {
  const Problem p;
  for (const OptimizerConfig& config : {adamw_config(), sgd_config(false), sgd_config(true)}) {
    const Result whole = run_whole(p, config);
    ASSERT_FALSE(whole.state.empty());
    ASSERT_NE(first_difference(whole.params, p.init), whole.params.size()) << "the steps changed nothing";
    for (const Split& sp : kSplits)
      for (auto [params_in_shard, grads_in_shard] : kModes) {
        SCOPED_TRACE(enum_string(config.kind) + (config.nesterov ? " nesterov" : "") + ", " + sp.name + " split over " +
                     std::to_string(sp.world) + " ranks, params " + (params_in_shard ? "shard" : "flat") +
                     ", grads " + (grads_in_shard ? "shard" : "flat"));
        const auto segs = split(p.store, sp.how, sp.world);
        Sharded sharded = run_sharded(p, config, segs, params_in_shard, grads_in_shard, false);
        const size_t at = first_difference(sharded.params, whole.params);
        EXPECT_EQ(at, whole.params.size()) << "first differing flat element " << at << ": "
                                           << sharded.params[std::min(at, whole.params.size() - 1)] << " vs "
                                           << whole.params[std::min(at, whole.params.size() - 1)];
        // State: each rank's buffers hold the whole optimizer's state of its segments.
        for (int r = 0; r < sp.world; ++r) {
          Optimizer& opt = *sharded.ranks[size_t(r)];
          EXPECT_EQ(opt.steps_taken(), kSteps);
          size_t want_local = 0;
          for (const FlatSegment& s : segs[size_t(r)]) want_local = std::max(want_local, s.local + s.size());
          EXPECT_EQ(opt.local_size(), want_local);
          auto buffers = opt.state_buffers();
          ASSERT_EQ(buffers.size(), whole.state.size());
          for (auto& [name, buf] : buffers) {
            ASSERT_EQ(buf->size(), opt.local_size()) << name;
            const std::vector<float>& flat = whole.state.at(name);
            const std::vector<float> mine = buf->to_host();
            for (const FlatSegment& s : segs[size_t(r)])
              EXPECT_EQ(std::memcmp(mine.data() + s.local, flat.data() + s.begin, s.size() * sizeof(float)), 0)
                  << name << " of rank " << r << " in [" << s.begin << ", " << s.end << ")";
          }
        }
      }
  }
}

TEST(ShardedUpdate, PaddingIsNeverRead) {
  // The gradients' padding is NaN: the parameters stay finite, and their
  // padding stays 0, for the whole store and for a split.
  const Problem p;
  for (const OptimizerConfig& config : {adamw_config(), sgd_config(false), lamb_config(), lars_config()}) {
    SCOPED_TRACE(enum_string(config.kind));
    const Result whole = run_whole(p, config);
    const Sharded sharded = run_sharded(p, config, split(p.store, unit_sliced_segments, 3), true, true, true);
    std::vector<bool> in_view(p.store.flat_size(), false);
    for (const ParamView& v : p.store.views())
      for (size_t j = 0; j < v.numel; ++j) in_view[v.offset + j] = true;
    for (size_t i = 0; i < in_view.size(); ++i) {
      ASSERT_TRUE(std::isfinite(whole.params[i])) << i;
      ASSERT_TRUE(std::isfinite(sharded.params[i])) << i;
      if (!in_view[i]) {
        ASSERT_EQ(whole.params[i], 0.0f) << "padding element " << i;
        ASSERT_EQ(sharded.params[i], 0.0f) << "padding element " << i;
      }
    }
  }
}

// ----- (b) LAMB and LARS: per-view norms summed over the ranks -----------------

// Largest |a - b| / (|b| + 1e-3) over the flat elements.
double max_relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double most = 0;
  for (size_t i = 0; i < a.size(); ++i)
    most = std::max(most, std::fabs(double(a[i]) - double(b[i])) / (std::fabs(double(b[i])) + 1e-3));
  return most;
}

TEST(ShardedUpdate, TrustRatioOptimizersNeedTheViewSumReducer) {
  const Problem p;
  for (const OptimizerConfig& config : {lamb_config(), lars_config()}) {
    const Result whole = run_whole(p, config);
    ASSERT_EQ(whole.trust.size(), p.store.views().size());
    // The decayed views adapt: their trust ratio is not 1.
    EXPECT_GT(std::fabs(whole.trust[view_index(p.store, "u0.w")] - 1.0), 1e-3);
    for (const Split& sp : kSplits)
      for (auto [params_in_shard, grads_in_shard] : kModes) {
        SCOPED_TRACE(enum_string(config.kind) + ", " + sp.name + " split over " + std::to_string(sp.world) + " ranks, params " +
                     (params_in_shard ? "shard" : "flat") + ", grads " + (grads_in_shard ? "shard" : "flat"));
        const auto segs = split(p.store, sp.how, sp.world);

        // With the reducer: every rank sees the whole-store norms (added in
        // another order), so trust ratios agree to double rounding and the
        // parameters to float rounding.
        Sharded reduced = run_sharded(p, config, segs, params_in_shard, grads_in_shard, true);
        for (int r = 0; r < sp.world; ++r) {
          const auto trust = trust_of(*reduced.ranks[size_t(r)]);
          ASSERT_EQ(trust.size(), whole.trust.size());
          for (size_t v = 0; v < trust.size(); ++v)
            EXPECT_NEAR(trust[v], whole.trust[v], 1e-12 * whole.trust[v]) << p.store.view(v).name << " rank " << r;
        }
        for (const ParamView& v : p.store.views())
          for (size_t j = 0; j < v.numel; ++j) {
            const size_t i = v.offset + j;
            ASSERT_NEAR(reduced.params[i], whole.params[i], 1e-6 * std::fabs(whole.params[i]) + 1e-7)
                << v.name << "[" << j << "]";
          }

        // Without it, each rank adapts a split view by the norms of its part
        // only: the split views' trust ratios and parameters differ.
        Sharded alone = run_sharded(p, config, segs, params_in_shard, grads_in_shard, false);
        EXPECT_GT(max_relative_difference(alone.params, whole.params), 1e-3);
        const size_t split_view = view_index(p.store, "u0.w");  // cut by every split here
        for (int r = 0; r < sp.world; ++r) {
          const auto trust = trust_of(*alone.ranks[size_t(r)]);
          bool owns_part = false;
          for (const UpdateChunk& c : alone.ranks[size_t(r)]->chunks().chunks) owns_part |= c.view == split_view;
          if (owns_part) {
            EXPECT_GT(std::fabs(trust[split_view] / whole.trust[split_view] - 1.0), 1e-3) << "rank " << r;
          }
        }
      }
  }
}

// ----- (c) the chunks a segment list cuts ----------------------------------------

std::tuple<size_t, size_t, size_t, bool> key(const UpdateChunk& c) { return {c.flat, c.size, c.view, c.weight_decay}; }

TEST(UpdateChunks, SegmentChunksAreTheWholeStoresCutAtTheSegmentBounds) {
  const Problem p;
  const ParamStore& s = p.store;
  const UpdateChunks whole(s);
  // The whole store: chunks of at most 4096 elements from each view's start,
  // covering every view exactly, local == flat.
  ASSERT_EQ(whole.first.size(), s.views().size() + 1);
  EXPECT_EQ(whole.local_size, s.flat_size());
  for (size_t v = 0; v < s.views().size(); ++v) {
    const ParamView& view = s.view(v);
    size_t at = view.offset;
    for (size_t c = whole.first[v]; c < whole.first[v + 1]; ++c) {
      const UpdateChunk& ch = whole.chunks[c];
      EXPECT_EQ(ch.flat, at);
      EXPECT_EQ(ch.local, ch.flat);
      EXPECT_EQ(ch.view, v);
      EXPECT_EQ(ch.weight_decay, view.weight_decay);
      EXPECT_EQ(ch.size, std::min(kUpdateChunkElems, view.offset + view.numel - at));
      at += ch.size;
    }
    EXPECT_EQ(at, view.offset + view.numel) << view.name;
  }
  EXPECT_EQ(whole.chunks.size(), 2u + 1 + 3 + 1 + 1 + 2 + 1 + 2);  // emb, emb.bias, u0.w, u0.b, u0.w2, u1.w, u1.ln, head

  for (const Split& sp : kSplits) {
    SCOPED_TRACE(std::string(sp.name) + " split over " + std::to_string(sp.world) + " ranks");
    const auto segs = split(s, sp.how, sp.world);
    std::set<size_t> cuts;  // every segment bound
    for (const auto& mine : segs)
      for (const FlatSegment& g : mine) cuts.insert({g.begin, g.end});
    // The whole store's chunks, split at every segment bound inside them.
    std::vector<UpdateChunk> pieces;
    for (const UpdateChunk& c : whole.chunks) {
      size_t lo = c.flat;
      for (auto it = cuts.upper_bound(c.flat); it != cuts.end() && *it < c.flat + c.size; ++it) {
        pieces.push_back({.flat = lo, .local = 0, .size = *it - lo, .view = c.view, .weight_decay = c.weight_decay});
        lo = *it;
      }
      pieces.push_back({.flat = lo, .local = 0, .size = c.flat + c.size - lo, .view = c.view, .weight_decay = c.weight_decay});
    }
    size_t total = 0;
    for (int r = 0; r < sp.world; ++r) {
      const FlatSegments& mine = segs[size_t(r)];
      const UpdateChunks chunks(s, mine);
      // Rank r's chunks are exactly the pieces inside its segments, in flat order.
      std::vector<std::tuple<size_t, size_t, size_t, bool>> want, got;
      for (const UpdateChunk& c : pieces)
        for (const FlatSegment& g : mine)
          if (c.flat >= g.begin && c.flat + c.size <= g.end) want.push_back(key(c));
      for (const UpdateChunk& c : chunks.chunks) got.push_back(key(c));
      EXPECT_EQ(got, want) << "rank " << r;
      total += got.size();
      // Local indices: the segment's local offset plus the distance from its begin.
      for (const UpdateChunk& c : chunks.chunks) {
        const FlatSegment* in = nullptr;
        for (const FlatSegment& g : mine)
          if (c.flat >= g.begin && c.flat < g.end) in = &g;
        ASSERT_NE(in, nullptr);
        EXPECT_EQ(c.local, in->local + (c.flat - in->begin)) << "chunk at " << c.flat << " of rank " << r;
      }
      // first[] indexes each view's chunks.
      ASSERT_EQ(chunks.first.size(), s.views().size() + 1);
      EXPECT_EQ(chunks.first.back(), chunks.size());
      for (size_t v = 0; v < s.views().size(); ++v)
        for (size_t c = chunks.first[v]; c < chunks.first[v + 1]; ++c) EXPECT_EQ(chunks.chunks[c].view, v);
      size_t want_local = 0;
      for (const FlatSegment& g : mine) want_local = std::max(want_local, g.local + g.size());
      EXPECT_EQ(chunks.local_size, want_local);
      EXPECT_EQ(chunks.flat_size, s.flat_size());
    }
    EXPECT_EQ(total, pieces.size()) << "the ranks' chunks together are every piece once";
    EXPECT_GT(pieces.size(), whole.chunks.size()) << "the split cuts some chunk";
  }
}

TEST(UpdateChunks, EmptySegmentListHasNoChunks) {
  const Problem p;
  const UpdateChunks chunks(p.store, FlatSegments{});
  EXPECT_EQ(chunks.size(), 0u);
  EXPECT_EQ(chunks.local_size, 0u);
  EXPECT_EQ(chunks.first, std::vector<size_t>(p.store.views().size() + 1, 0));
  // An optimizer over it updates nothing.
  auto opt = make_optimizer(adamw_config(), p.store, FlatSegments{});
  std::vector<float> params = p.init;
  opt->update({.params = params.data(), .grads = p.grads[0].data()}, 0.1f);
  EXPECT_EQ(first_difference(params, p.init), params.size());
  EXPECT_EQ(opt->steps_taken(), 1);
}

TEST(UpdateChunks, RefusesUnsortedOverlappingOrOutOfRangeSegments) {
  const Problem p;
  const size_t n = p.store.flat_size();
  const std::vector<FlatSegments> bad = {
      {{.begin = 100, .end = 200, .local = 0}, {.begin = 0, .end = 50, .local = 100}},   // unsorted
      {{.begin = 0, .end = 100, .local = 0}, {.begin = 99, .end = 200, .local = 100}},   // overlapping
      {{.begin = 0, .end = n + 1, .local = 0}},                                          // past the end
      {{.begin = n + 5, .end = n + 10, .local = 0}},                                     // wholly outside
      {{.begin = 60, .end = 50, .local = 0}},                                            // reversed
  };
  for (size_t i = 0; i < bad.size(); ++i) {
    EXPECT_THROW(UpdateChunks(p.store, bad[i]), Error) << "case " << i;
    EXPECT_THROW(make_optimizer(lamb_config(), p.store, bad[i]), Error) << "case " << i;
  }
  // Adjacent segments and one ending exactly at the store's end are fine.
  EXPECT_NO_THROW(UpdateChunks(p.store, FlatSegments{{.begin = 0, .end = 100, .local = 0},
                                                     {.begin = 100, .end = n, .local = 100}}));
}

}  // namespace
}  // namespace meshtrain
