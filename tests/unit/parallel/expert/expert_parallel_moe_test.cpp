// The mixture-of-experts layer with its experts split over X ranks (threads
// over in-process transports, the real all-to-alls) against the one-rank
// layer on the same global batch: each rank routes its share of the
// sequences, and together they give the serial output and input gradient
// row for row, each expert's gradient on the rank that holds it, and the
// router's gradient as the sum over ranks. Also a router that sends every
// token to one expert, with and without capacity.
#include <gtest/gtest.h>


#include "meshtrain/comm/group/process_group.hpp"
#include "meshtrain/comm/transport/inproc/inproc_transport.hpp"
#include "meshtrain/core/error.hpp"
#include "meshtrain/nn/moe/moe_mlp.hpp"
#include "meshtrain/nn/workspace.hpp"
#include "meshtrain/parallel/expert/expert_parallel_group.hpp"
#include "thread_ranks.hpp"

namespace meshtrain::parallel {
namespace {

constexpr int64_t B = 4, T = 5, C = 8, E = 4;

std::vector<float> values(size_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = rng.normal();
  return v;
}

void run_expert_ranks(int ways, const std::function<void(int, ExpertParallelGroup&)>& body,
                      Precision wire = Precision::Fp32) {
  testing::on_inproc_ranks(ways, [&](int r, comm::ProcessGroup& group) {
    ExpertParallelGroup ep(group, wire);
    body(r, ep);
  });
}

struct RankResult {
  std::vector<float> y, dx;
  double dropped = 0, tokens = 0;
};

nn::MoeConfig config(int64_t k, double capacity_factor) {
  nn::MoeConfig c;
  c.n_expert = E;
  c.top_k = k;
  c.capacity_factor = capacity_factor;
  // No z-loss: it is a mean over each rank's own tokens (as the language
  // model's loss), which the data-parallel average makes global; this test
  // sums the ranks' router gradients instead.
  c.z_loss_coef = 0.0;
  return c;
}

// Forward and backward of `sequences` sequences starting at `first`.
RankResult run(nn::MoeMlp& layer, nn::RouterSums& sums, const std::vector<float>& x, const std::vector<float>& dout,
               int64_t first, int64_t sequences) {
  const size_t begin = size_t(first * T * C), n = size_t(sequences * T * C);
  std::vector<float> xs(x.begin() + std::ptrdiff_t(begin), x.begin() + std::ptrdiff_t(begin + n));
  std::vector<float> ds(dout.begin() + std::ptrdiff_t(begin), dout.begin() + std::ptrdiff_t(begin + n));
  RankResult r;
  const float* y = layer.forward(xs.data(), sequences, T, xs.data());
  r.y.assign(y, y + n);
  r.dx.resize(n);
  nn::Workspace ws{kernels::cpu_backend().allocator()};
  layer.backward(r.dx.data(), ds.data(), ws);
  r.dropped = sums.dropped();
  r.tokens = sums.tokens();
  return r;
}

void init(ParamStore& store, bool one_expert) {
  Rng rng(21);
  for (const ParamView& v : store.views()) {
    float* p = store.param(size_t(&v - store.views().data()));
    for (size_t i = 0; i < v.numel; ++i) p[i] = rng.normal() * 0.3f;
    if (one_expert && v.name.ends_with("router.weight")) {
      // Whatever the token, expert 2 wins by far.
      for (int64_t c = 0; c < C; ++c)
        for (int64_t e = 0; e < E; ++e) p[c * E + e] = 0.0f;
    }
  }
}

size_t mismatches(const float* got, const float* want, size_t n) {
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i) bad += !(std::abs(got[i] - want[i]) <= 1e-5f * (1.0f + std::abs(want[i])));
  return bad;
}

void expect_equals_serial(int64_t k, double capacity_factor, bool one_expert) {
  const auto x = values(B * T * C, 1), dout = values(B * T * C, 2);
  std::vector<float> xb = x;
  if (one_expert)  // a constant feature the router reads: every token to expert 2
    for (int64_t t = 0; t < B * T; ++t) xb[size_t(t * C)] = 1.0f;
  ParamStore serial_store;
  nn::RouterSums serial_sums(E, C, true);
  nn::MoeMlp serial(serial_store, "h.0.mlp", C, config(k, capacity_factor), nullptr, nullptr, &serial_sums);
  serial_store.allocate();
  init(serial_store, one_expert);
  auto steer = [&](ParamStore& store) {
    if (!one_expert) return;
    float* w = store.param(size_t(store.find("h.0.mlp.router.weight") - store.views().data()));
    w[0 * E + 2] = 10.0f;
  };
  steer(serial_store);
  const RankResult want = run(serial, serial_sums, xb, dout, 0, B);

  for (int ways : {1, 2, 4}) {
    SCOPED_TRACE("expert-parallel ways " + std::to_string(ways));
    std::vector<ParamStore> stores(static_cast<size_t>(ways));
    std::vector<RankResult> got(static_cast<size_t>(ways));
    std::vector<std::vector<double>> sums(static_cast<size_t>(ways));
    run_expert_ranks(ways, [&](int r, ExpertParallelGroup& ep) {
      ParamStore& store = stores[size_t(r)];
      nn::RouterSums rank_sums(E, C, true);
      nn::MoeMlp layer(store, "h.0.mlp", C, config(k, capacity_factor), nullptr, &ep, &rank_sums);
      store.allocate();
      // The same values by name as the serial store.
      for (const ParamView& v : store.views()) {
        const ParamView& s = *serial_store.find(v.name);
        std::copy_n(serial_store.params().data() + s.offset, v.numel, store.params().data() + v.offset);
      }
      EXPECT_EQ(layer.local_experts(), E / ways);
      EXPECT_EQ(layer.first_expert(), r * (E / ways));
      const int64_t share = B / ways;
      got[size_t(r)] = run(layer, rank_sums, xb, dout, r * share, share);
      sums[size_t(r)].assign(rank_sums.values().begin(), rank_sums.values().end());
    });
    const size_t part = size_t(B / ways * T * C);
    std::vector<double> total(sums[0].size(), 0.0);
    std::vector<float> router_grad(size_t(C * E), 0.0f);
    for (int r = 0; r < ways; ++r) {
      SCOPED_TRACE("rank " + std::to_string(r));
      EXPECT_EQ(mismatches(got[size_t(r)].y.data(), want.y.data() + size_t(r) * part, part), 0u) << "output";
      EXPECT_EQ(mismatches(got[size_t(r)].dx.data(), want.dx.data() + size_t(r) * part, part), 0u) << "d input";
      for (size_t i = 0; i < total.size(); ++i) total[i] += sums[size_t(r)][i];
      const ParamStore& store = stores[size_t(r)];
      for (const ParamView& v : store.views()) {
        const ParamView& s = *serial_store.find(v.name);
        if (v.expert) {
          EXPECT_EQ(mismatches(store.grads().data() + v.offset, serial_store.grads().data() + s.offset, v.numel), 0u)
              << v.name << " gradient";
        } else {
          for (size_t i = 0; i < v.numel; ++i) router_grad[i] += store.grads()[v.offset + i];
        }
      }
    }
    const ParamView& w = *serial_store.find("h.0.mlp.router.weight");
    EXPECT_EQ(mismatches(router_grad.data(), serial_store.grads().data() + w.offset, w.numel), 0u) << "router gradient";
    // The sums add over ranks to the one-rank step's: tokens, drops, loads.
    EXPECT_EQ(total[0], want.tokens);
    EXPECT_EQ(total[1], want.dropped);
    for (size_t i = 3; i < 3 + size_t(E); ++i) EXPECT_EQ(total[i], serial_sums.values()[i]) << "load of expert " << i - 3;
  }
  if (one_expert) {
    EXPECT_EQ(serial_sums.count(2), double(B * T));
    const double capacity = config(k, capacity_factor).capacity(T);
    EXPECT_EQ(want.dropped, capacity > 0 ? double(B) * (T - capacity) : 0.0);
  }
}

TEST(ExpertParallelMoe, Top2DroplessEqualsOneRank) { expect_equals_serial(2, 0.0, false); }
TEST(ExpertParallelMoe, Top1WithCapacityEqualsOneRank) { expect_equals_serial(1, 1.0, false); }
TEST(ExpertParallelMoe, EveryTokenToOneExpertDropless) { expect_equals_serial(2, 0.0, true); }
TEST(ExpertParallelMoe, EveryTokenToOneExpertWithCapacity) { expect_equals_serial(1, 1.25, true); }

// A bf16 wire (parallel.reduce_dtype): every row arrives as the bf16
// rounding of what was sent (a rank's rows to itself too), unequal counts
// and an empty exchange included.
TEST(ExpertParallelMoe, Bf16WireDeliversTheRoundedRows) {
  const int ways = 3;
  auto sent_value = [](int from, int to, size_t i) { return 0.1f * float(from) + 0.01f * float(to) + 1e-4f * float(i); };
  auto count = [](int from, int to) { return size_t((from + 2 * to) % 4); };  // 0 to 3 floats, one pair empty
  std::vector<std::vector<float>> got(ways);
  run_expert_ranks(
      ways,
      [&](int r, ExpertParallelGroup& ep) {
        std::vector<size_t> s(ways), rc(ways);
        std::vector<float> send;
        for (int d = 0; d < ways; ++d) {
          s[size_t(d)] = count(r, d);
          rc[size_t(d)] = count(d, r);
          for (size_t i = 0; i < s[size_t(d)]; ++i) send.push_back(sent_value(r, d, i));
        }
        std::vector<float> recv(rc[0] + rc[1] + rc[2]);
        ep.all_to_all_v(send.data(), s, recv.data(), rc);
        got[size_t(r)] = recv;
      },
      Precision::Bf16);
  for (int r = 0; r < ways; ++r) {
    std::vector<float> want;
    for (int from = 0; from < ways; ++from)
      for (size_t i = 0; i < count(from, r); ++i) want.push_back(to_float(to_bf16(sent_value(from, r, i))));
    EXPECT_EQ(got[size_t(r)], want) << "rank " << r;
  }
}

TEST(ExpertParallelMoe, ExpertsMustDivideByTheRanks) {
  std::vector<std::string> errors(3);
  run_expert_ranks(3, [&](int r, ExpertParallelGroup& ep) {
    ParamStore store;
    try {
      nn::MoeMlp layer(store, "m", C, config(2, 0), nullptr, &ep, nullptr);
    } catch (const ConfigError& e) {
      errors[size_t(r)] = e.what();
    }
  });
  for (const std::string& e : errors) EXPECT_NE(e.find("does not divide"), std::string::npos) << e;
}

}  // namespace
}  // namespace meshtrain::parallel
