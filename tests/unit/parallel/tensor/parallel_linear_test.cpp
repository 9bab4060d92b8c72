// Tensor-parallel linears (Megatron's column and row parallelism) against
// their serial twins with the same weights: T ranks as threads, T = 1, 2, 4.
// The pair column -> row is an MLP (c_fc, c_proj with the residual); a
// blocked column shard is c_attn's fused q, k, v.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include "meshtrain/comm/group/process_group.hpp"
#include "meshtrain/comm/transport/inproc/inproc_transport.hpp"
#include "meshtrain/nn/linear.hpp"
#include "meshtrain/parallel/tensor/tensor_parallel_group.hpp"

namespace meshtrain::parallel {
namespace {

constexpr int64_t M = 3, C = 8;
constexpr float kStd = 0.5f;

std::vector<float> values(size_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = rng.normal();
  return v;
}

void expect_close(const float* got, const float* want, size_t n, const std::string& what) {
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i) bad += std::abs(got[i] - want[i]) > 1e-5f * (1.0f + std::abs(want[i]));
  EXPECT_EQ(bad, 0u) << what;
}

// A view's gradient against the serial store's gradient of the same name, at
// the view's global indices.
void expect_grad_slice(const ParamStore& shard, const ParamStore& serial, const std::string& name) {
  const ParamView& v = *shard.find(name);
  const ParamView& w = *serial.find(name);
  std::vector<float> want(v.numel);
  for (size_t i = 0; i < v.numel; ++i) want[i] = serial.grads()[w.offset + global_index(v.global_shape, v.placement, i)];
  expect_close(shard.grads().data() + v.offset, want.data(), v.numel, name + " gradient");
}

struct Mlp {
  Mlp(ParamStore& store, nn::TensorParallelComm* tp)
      : fc(store, "mlp.c_fc", C, 4 * C, true, {tp ? nn::LinearShard::Kind::Column : nn::LinearShard::Kind::None, tp}),
        proj(store, "mlp.c_proj", 4 * C, C, true, {tp ? nn::LinearShard::Kind::Row : nn::LinearShard::Kind::None, tp}) {
    store.allocate();
    Rng rng(7);
    fc.init(rng, kStd);
    proj.init(rng, kStd);
    // Non-zero biases, the same in every layout (a replicated or sharded view of one vector).
    for (auto* l : {&fc, &proj}) {
      const ParamView& b = *store.find(l == &fc ? "mlp.c_fc.bias" : "mlp.c_proj.bias");
      for (size_t i = 0; i < b.numel; ++i)
        store.params()[b.offset + i] = 0.01f * float(global_index(b.global_shape, b.placement, i) + 1);
    }
  }
  nn::Linear fc, proj;
};

TEST(ParallelLinear, ColumnThenRowEqualsTheSerialPair) {
  const auto x = values(M * C, 1), dy = values(M * C, 2);
  ParamStore serial_store;
  Mlp serial(serial_store, nullptr);
  const float* y_serial = serial.proj.forward(serial.fc.forward(x.data(), M), M, x.data());
  std::vector<float> dh_serial(M * 4 * C), dx_serial(M * C);
  serial.proj.backward(dh_serial.data(), dy.data());
  serial.fc.backward(dx_serial.data(), dh_serial.data());

  for (int T : {1, 2, 4}) {
    SCOPED_TRACE("T = " + std::to_string(T));
    auto transports = comm::make_inproc_transports(T);
    std::vector<ParamStore> stores(static_cast<size_t>(T));
    std::vector<std::vector<float>> y(static_cast<size_t>(T)), dx(static_cast<size_t>(T));
    std::vector<std::thread> ranks;
    for (int r = 0; r < T; ++r) {
      ranks.emplace_back([&, r] {
        auto communicator = std::make_shared<comm::Communicator>(std::move(transports[size_t(r)]));
        comm::ProcessGroup group(communicator);
        TensorParallelGroup tp(group);
        Mlp mlp(stores[size_t(r)], &tp);
        const float* out = mlp.proj.forward(mlp.fc.forward(x.data(), M), M, x.data());
        y[size_t(r)].assign(out, out + M * C);
        std::vector<float> dh(M * 4 * C / T);
        dx[size_t(r)].resize(M * C);
        mlp.proj.backward(dh.data(), dy.data());
        mlp.fc.backward(dx[size_t(r)].data(), dh.data());
      });
    }
    for (auto& t : ranks) t.join();
    for (int r = 0; r < T; ++r) {
      SCOPED_TRACE("rank " + std::to_string(r));
      expect_close(y[size_t(r)].data(), y_serial, M * C, "output");
      expect_close(dx[size_t(r)].data(), dx_serial.data(), M * C, "input gradient");
      EXPECT_EQ(stores[size_t(r)].find("mlp.c_fc.weight")->shape, (Shape{C, 4 * C / T}));
      EXPECT_EQ(stores[size_t(r)].find("mlp.c_proj.weight")->shape, (Shape{4 * C / T, C}));
      for (const char* name : {"mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias"})
        expect_grad_slice(stores[size_t(r)], serial_store, name);
    }
  }
}

// c_attn (C, 3C): each rank's output columns are its heads' q, k and v.
TEST(ParallelLinear, BlockedColumnShardOutputsItsPartOfEachBlock) {
  const auto x = values(M * C, 3);
  ParamStore serial_store;
  nn::Linear serial(serial_store, "attn.c_attn", C, 3 * C);
  serial_store.allocate();
  Rng rng(9);
  serial.init(rng, kStd);
  const float* want = serial.forward(x.data(), M);
  constexpr int T = 2;
  auto transports = comm::make_inproc_transports(T);
  std::vector<std::thread> ranks;
  std::vector<std::vector<float>> got(T);
  std::vector<Placement> placements(T);
  for (int r = 0; r < T; ++r) {
    ranks.emplace_back([&, r] {
      auto communicator = std::make_shared<comm::Communicator>(std::move(transports[size_t(r)]));
      comm::ProcessGroup group(communicator);
      TensorParallelGroup tp(group);
      ParamStore store;
      nn::Linear attn(store, "attn.c_attn", C, 3 * C, true, {nn::LinearShard::Kind::Column, &tp, 3});
      store.allocate();
      Rng init(9);
      attn.init(init, kStd);
      const float* out = attn.forward(x.data(), M);
      got[size_t(r)].assign(out, out + M * 3 * C / T);
      placements[size_t(r)] = store.find("attn.c_attn.weight")->placement;
    });
  }
  for (auto& t : ranks) t.join();
  for (int r = 0; r < T; ++r) {
    // Output (M, 3C/T) is placed like the weight's columns.
    std::vector<float> expected(M * 3 * C / T);
    for (size_t i = 0; i < expected.size(); ++i) expected[i] = want[global_index({M, 3 * C}, placements[size_t(r)], i)];
    expect_close(got[size_t(r)].data(), expected.data(), expected.size(), "rank " + std::to_string(r) + " output");
  }
}

}  // namespace
}  // namespace meshtrain::parallel
