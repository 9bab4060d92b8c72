// Tensor-parallel linears (Megatron's column and row parallelism) against
// their serial twins with the same weights: T ranks as threads, T = 1, 2, 4.
// The pair column -> row is an MLP (c_fc, c_proj with the residual); a
// blocked column shard is c_attn's fused q, k, v.
#include <gtest/gtest.h>

#include "meshtrain/nn/linear.hpp"
#include "tp_test_util.hpp"

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
  EXPECT_EQ(tp_test::mismatches(got, want, n), 0u) << what;
}

struct Mlp {
  Mlp(ParamStore& store, nn::TensorParallelComm* tp)
      : fc(store, "mlp.c_fc", C, 4 * C, true, nn::LinearShard::column(tp)),
        proj(store, "mlp.c_proj", 4 * C, C, true, nn::LinearShard::row(tp)) {
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
    std::vector<ParamStore> stores(static_cast<size_t>(T));
    std::vector<std::vector<float>> y(static_cast<size_t>(T)), dx(static_cast<size_t>(T));
    tp_test::run_tensor_ranks(T, [&](int r, TensorParallelGroup& tp) {
      Mlp mlp(stores[size_t(r)], &tp);
      const float* out = mlp.proj.forward(mlp.fc.forward(x.data(), M), M, x.data());
      y[size_t(r)].assign(out, out + M * C);
      std::vector<float> dh(M * 4 * C / T);
      dx[size_t(r)].resize(M * C);
      mlp.proj.backward(dh.data(), dy.data());
      mlp.fc.backward(dx[size_t(r)].data(), dh.data());
    });
    for (int r = 0; r < T; ++r) {
      SCOPED_TRACE("rank " + std::to_string(r));
      expect_close(y[size_t(r)].data(), y_serial, M * C, "output");
      expect_close(dx[size_t(r)].data(), dx_serial.data(), M * C, "input gradient");
      EXPECT_EQ(stores[size_t(r)].find("mlp.c_fc.weight")->shape, (Shape{C, 4 * C / T}));
      EXPECT_EQ(stores[size_t(r)].find("mlp.c_proj.weight")->shape, (Shape{4 * C / T, C}));
      for (const char* name : {"mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias"})
        EXPECT_EQ(tp_test::grad_slice_mismatches(stores[size_t(r)], *stores[size_t(r)].find(name), serial_store), 0u)
            << name << " gradient";
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
  std::vector<std::vector<float>> got(T);
  std::vector<Placement> placements(T);
  tp_test::run_tensor_ranks(T, [&](int r, TensorParallelGroup& tp) {
    ParamStore store;
    nn::Linear attn(store, "attn.c_attn", C, 3 * C, true, nn::LinearShard::column(&tp, 3));
    store.allocate();
    Rng init(9);
    attn.init(init, kStd);
    const float* out = attn.forward(x.data(), M);
    got[size_t(r)].assign(out, out + M * 3 * C / T);
    placements[size_t(r)] = store.find("attn.c_attn.weight")->placement;
  });
  for (int r = 0; r < T; ++r) {
    // Output (M, 3C/T) is placed like the weight's columns.
    std::vector<float> expected(M * 3 * C / T);
    for (size_t i = 0; i < expected.size(); ++i) expected[i] = want[global_index({M, 3 * C}, placements[size_t(r)], i)];
    expect_close(got[size_t(r)].data(), expected.data(), expected.size(), "rank " + std::to_string(r) + " output");
  }
}

}  // namespace
}  // namespace meshtrain::parallel
