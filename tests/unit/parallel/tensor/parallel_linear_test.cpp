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

// The pair over `rows` rows against the serial pair at T = 1, 2, 4. Under
// sequence parallelism each rank holds rows/T rows of the input, residual and
// output (c_fc gathers them, c_proj scatters its sum), and its output and
// input-gradient rows are the serial ones' rows [r rows/T, (r+1) rows/T).
// Every gradient slice is the serial one, and c_proj's replicated bias
// gradient has the same bits on every rank (under sequence parallelism it is
// made whole from the gathered dout).
void expect_pair_equals_serial(int64_t rows, bool sequence_parallel) {
  const auto x = values(rows * C, 1), dy = values(rows * C, 2);
  ParamStore serial_store;
  Mlp serial(serial_store, nullptr);
  const float* y = serial.proj.forward(serial.fc.forward(x.data(), rows), rows, x.data());
  const std::vector<float> y_serial(y, y + rows * C);
  std::vector<float> dh_serial(rows * 4 * C), dx_serial(rows * C);
  serial.proj.backward(dh_serial.data(), dy.data());
  serial.fc.backward(dx_serial.data(), dh_serial.data());

  for (int T : {1, 2, 4}) {
    SCOPED_TRACE("T = " + std::to_string(T));
    const int64_t local = sequence_parallel ? rows / T : rows;  // rows on the residual side
    std::vector<ParamStore> stores(static_cast<size_t>(T));
    std::vector<std::vector<float>> y_got(static_cast<size_t>(T)), dx(static_cast<size_t>(T));
    tp_test::run_tensor_ranks(
        T,
        [&](int r, TensorParallelGroup& tp) {
          Mlp mlp(stores[size_t(r)], &tp);
          const auto x_mine = tp_test::rank_part(x, r, T, sequence_parallel);
          const auto dy_mine = tp_test::rank_part(dy, r, T, sequence_parallel);
          const float* out = mlp.proj.forward(mlp.fc.forward(x_mine.data(), rows), rows, x_mine.data());
          y_got[size_t(r)].assign(out, out + local * C);
          std::vector<float> dh(rows * 4 * C / T);
          dx[size_t(r)].resize(local * C);
          mlp.proj.backward(dh.data(), dy_mine.data());
          mlp.fc.backward(dx[size_t(r)].data(), dh.data());
        },
        sequence_parallel);
    for (int r = 0; r < T; ++r) {
      SCOPED_TRACE("rank " + std::to_string(r));
      const ParamStore& store = stores[size_t(r)];
      expect_close(y_got[size_t(r)].data(), tp_test::rank_part(y_serial, r, T, sequence_parallel).data(), local * C,
                   "output");
      expect_close(dx[size_t(r)].data(), tp_test::rank_part(dx_serial, r, T, sequence_parallel).data(), local * C,
                   "input gradient");
      EXPECT_EQ(store.find("mlp.c_fc.weight")->shape, (Shape{C, 4 * C / T}));
      EXPECT_EQ(store.find("mlp.c_proj.weight")->shape, (Shape{4 * C / T, C}));
      for (const ParamView& v : store.views())
        EXPECT_EQ(tp_test::grad_slice_mismatches(store, v, serial_store), 0u) << v.name << " gradient";
      const ParamView& bias = *store.find("mlp.c_proj.bias");
      EXPECT_EQ(tp_test::mismatches(store.grads().data() + bias.offset, stores[0].grads().data() + bias.offset,
                                    bias.numel, 0.0f),
                0u)
          << "the replicated bias gradient has the same bits on every rank";
    }
  }
}

TEST(ParallelLinear, ColumnThenRowEqualsTheSerialPair) { expect_pair_equals_serial(M, false); }

TEST(ParallelLinear, SequenceParallelPairEqualsTheSerialPairRowByRow) {
  expect_pair_equals_serial(4, true);  // 4, 2 and 1 rows per rank
}

TEST(ParallelLinear, SequenceParallelRowsMustSplit) {
  const auto errors = tp_test::rank_errors(
      2,
      [&](int, TensorParallelGroup& tp) {
        ParamStore store;
        Mlp mlp(store, &tp);
        const auto x = values(C, 6);
        mlp.fc.forward(x.data(), 3);
      },
      /*sequence_parallel=*/true);
  for (const auto& e : errors)
    EXPECT_NE(e.find("3 rows do not split over the 2 tensor-parallel ways"), std::string::npos) << e;
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
