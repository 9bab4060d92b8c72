// The planner's stand-in for an expert group (mirrored_expert_group.hpp):
// its exchanges by hand, and a MoE layer built with it computing exactly
// what the busiest rank of a real group computes when every rank routes the
// same tokens (X ranks as threads over in-process transports): the same
// expert gradients, bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>

#include "meshtrain/comm/group/process_group.hpp"
#include "meshtrain/comm/transport/inproc/inproc_transport.hpp"
#include "meshtrain/nn/moe/moe_mlp.hpp"
#include "meshtrain/nn/workspace.hpp"
#include "meshtrain/parallel/expert/expert_parallel_group.hpp"
#include "meshtrain/parallel/expert/mirrored_expert_group.hpp"
#include "thread_ranks.hpp"

namespace meshtrain::parallel {
namespace {

constexpr int64_t B = 2, T = 6, C = 8, E = 4;

TEST(MirroredExpertGroup, EveryPeerSendsWhatThisRankSendsTheBusiestOne) {
  MirroredExpertGroup group(1, 3);
  EXPECT_EQ(group.rank(), 1);
  EXPECT_EQ(group.size(), 3);
  // Counts: 2 per rank; rank 2's total (5) is the largest.
  const int64_t counts[6] = {1, 1, 0, 3, 4, 1};
  int64_t got[6] = {};
  group.all_to_all(counts, got, 2);
  for (int s = 0; s < 3; ++s) {
    EXPECT_EQ(got[2 * s], 4);
    EXPECT_EQ(got[2 * s + 1], 1);
  }
  // Rows: segments of 1, 3 and 2 floats; every received segment is cut
  // from, or repeats, the largest (rank 1's here).
  const float send[6] = {9, 1, 2, 3, 7, 7};
  const size_t send_counts[3] = {1, 3, 2}, recv_counts[3] = {3, 2, 5};
  float recv[10] = {};
  group.all_to_all_v(send, send_counts, recv, recv_counts);
  const float want[10] = {1, 2, 3, 1, 2, 1, 2, 3, 1, 2};
  for (int i = 0; i < 10; ++i) EXPECT_EQ(recv[i], want[i]) << i;
  // Nothing sent: zeros, not garbage.
  const size_t none[3] = {0, 0, 0}, two[3] = {2, 0, 0};
  float zeros[2] = {5, 5};
  group.all_to_all_v(send, none, zeros, two);
  EXPECT_EQ(zeros[0], 0.0f);
  EXPECT_EQ(zeros[1], 0.0f);
}

std::vector<float> values(size_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = rng.normal();
  return v;
}

nn::MoeConfig config() {
  nn::MoeConfig c;
  c.n_expert = E;
  c.top_k = 2;
  return c;
}

void set_params(ParamStore& store) {
  for (const ParamView& v : store.views()) {
    // Every expert's values depend on its name only, so any rank's store agrees.
    Rng named(std::hash<std::string>{}(v.name));
    float* p = store.param(size_t(&v - store.views().data()));
    for (size_t i = 0; i < v.numel; ++i) p[i] = named.normal() * 0.3f;
  }
}

void step(nn::MoeMlp& layer, const std::vector<float>& x, const std::vector<float>& dout) {
  layer.forward(x.data(), B, T, x.data());
  std::vector<float> dx(x.size());
  nn::Workspace ws{kernels::cpu_backend().allocator()};
  layer.backward(dx.data(), dout.data(), ws);
}

TEST(MirroredExpertGroup, ComputesTheBusiestRanksRows) {
  const auto x = values(size_t(B * T * C), 11), dout = values(size_t(B * T * C), 12);
  for (int ways : {2, 4}) {
    SCOPED_TRACE("expert-parallel ways " + std::to_string(ways));
    // Every rank of a real group routes the same tokens.
    std::vector<ParamStore> stores(static_cast<size_t>(ways));
    std::vector<std::vector<int64_t>> loads(static_cast<size_t>(ways));
    testing::on_inproc_ranks(ways, [&](int r, comm::ProcessGroup& group) {
      ExpertParallelGroup ep(group);
      nn::MoeMlp layer(stores[size_t(r)], "h.0.mlp", C, config(), nullptr, &ep, nullptr);
      stores[size_t(r)].allocate();
      set_params(stores[size_t(r)]);
      step(layer, x, dout);
      auto& load = loads[size_t(r)];
      load.assign(size_t(ways), 0);
      for (int64_t i = 0; i < B * T * 2; ++i) ++load[size_t(layer.router().choices()[i] / (E / ways))];
    });
    const auto busiest = size_t(std::max_element(loads[0].begin(), loads[0].end()) - loads[0].begin());

    ParamStore probe_store;
    MirroredExpertGroup mirror(int(busiest), ways);
    nn::MoeMlp probe(probe_store, "h.0.mlp", C, config(), nullptr, &mirror, nullptr);
    probe_store.allocate();
    set_params(probe_store);
    step(probe, x, dout);
    EXPECT_EQ(probe.first_expert(), int64_t(busiest) * (E / ways));
    const ParamStore& real = stores[busiest];
    size_t experts = 0;
    for (const ParamView& v : probe_store.views()) {
      if (!v.expert) continue;
      const ParamView& w = *real.find(v.name);
      ++experts;
      for (size_t i = 0; i < v.numel; ++i)
        ASSERT_EQ(probe_store.grads()[v.offset + i], real.grads()[w.offset + i]) << v.name << " [" << i << "]";
    }
    EXPECT_EQ(experts, size_t(E / ways) * 4);  // c_fc and c_proj, weight and bias
  }
}

}  // namespace
}  // namespace meshtrain::parallel
