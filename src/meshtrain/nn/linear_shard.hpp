#pragma once
// How a Linear is split over the ranks of a tensor-parallel group
// (Megatron), and the communication that split needs around the layer's
// products: the layer asks its shard where each product reads and writes,
// and the shard gathers, sums or scatters over the group. The serial
// layer's shard (Kind::None) passes everything through.
//   Column  each rank holds out/T of the output columns (and of the bias):
//           forward needs no communication, backward sums the input gradient
//           over the group. `blocks` > 1 splits a fused weight block by block
//           (c_attn's q, k, v: each rank gets its heads of all three).
//   Row     each rank holds in/T of the input rows and takes its part of the
//           input: forward sums the partial outputs over the group, then the
//           layer adds the (replicated) bias and the residual once; backward
//           needs none.
// Under sequence parallelism (tp->sequence_parallel(), tensor_parallel.hpp)
// the side facing the residual stream holds this rank's M/T rows:
//   Column  forward all-gathers the input rows (M/T, in) -> (M, in), kept for
//           the weight gradient; backward reduce-scatters the input gradient
//           (M, in) -> (M/T, in) instead of all-reducing it.
//   Row     forward reduce-scatters the partial output (M, out) -> (M/T, out)
//           instead of all-reducing it, then the bias and residual go onto
//           those rows; backward all-gathers dout (M/T, out) -> (M, out), so
//           the weight, bias and input gradients see every row (the bias
//           gradient is whole, the same on every rank).
// `work` below is the layer's sequence-parallel work area (M rows), which it
// may share with other layers (recompute.hpp).
#include <cstdint>

#include "meshtrain/core/device_array.hpp"
#include "meshtrain/core/param_store.hpp"
#include "meshtrain/nn/tensor_parallel.hpp"

namespace meshtrain::nn {

struct LinearShard {
  enum class Kind { None, Column, Row };
  Kind kind = Kind::None;
  TensorParallelComm* tp = nullptr;  // required for Column and Row
  int blocks = 1;                    // Column only

  // A column or row shard over `tp`, or the serial layer when tp is null.
  static LinearShard column(TensorParallelComm* tp, int blocks = 1) {
    return tp ? LinearShard{Kind::Column, tp, blocks} : LinearShard{};
  }
  static LinearShard row(TensorParallelComm* tp) { return tp ? LinearShard{Kind::Row, tp, 1} : LinearShard{}; }

  // This rank's part of the weight (in, out) and of the bias (out).
  Placement weight_placement() const;
  Placement bias_placement() const;
  bool sequence_parallel() const { return kind != Kind::None && tp->sequence_parallel(); }
  // The rows this rank holds on the residual side: M, or M/T under
  // sequence parallelism (Error when M does not divide by T).
  int64_t local_rows(int64_t M) const;
  // The rows of the layer's output on this rank: a row shard's output is
  // the residual side; a column shard's covers every row it gathered.
  int64_t output_rows(int64_t M) const { return kind == Kind::Row ? local_rows(M) : M; }

  // Forward. A column shard under sequence parallelism gathers its fp32
  // input: a producer cannot hand it over already rounded.
  bool gathers_input() const { return kind == Kind::Column && sequence_parallel(); }
  // The input (M, in) the products read: `inp`, or this rank's rows
  // gathered into `work` (gathers_input()).
  const float* gather_input(const float* inp, int64_t M, int64_t in, DeviceArray<float>& work) const;
  // A row shard's products are partial sums: the layer adds its bias and
  // residual after finish_output(), once.
  bool sums_output() const { return kind == Kind::Row; }
  // Where the products write the output (M, n): `out`, or under sequence
  // parallelism a row shard's partial sums in `work`.
  float* product_output(float* out, int64_t M, int64_t n, DeviceArray<float>& work) const;
  // A row shard's partial sums over the group into `out`: an all-reduce in
  // place, or a reduce-scatter of `partial` to this rank's rows.
  void finish_output(float* partial, float* out, int64_t M, int64_t n) const;

  // Backward. A row shard under sequence parallelism gathers its fp32 dout:
  // a producer cannot hand it over already rounded.
  bool gathers_output_grad() const { return kind == Kind::Row && sequence_parallel(); }
  // The output gradient (M, n) the products read: `dout`, or this rank's
  // rows gathered into `work` (gathers_output_grad()).
  const float* gather_output_grad(const float* dout, int64_t M, int64_t n, DeviceArray<float>& work) const;
  // A column shard's input gradient covers its output columns only: it sums
  // over the group, in fp32.
  bool sums_input_grad() const { return kind == Kind::Column; }
  // Where the input gradient's product writes (M, in): `dinp`, or under
  // sequence parallelism a column shard's whole rows in `work` (after the
  // weight gradient has read the gathered input there).
  float* product_input_grad(float* dinp, DeviceArray<float>& work) const {
    return gathers_input() ? work.raw() : dinp;
  }
  // A column shard's input gradient summed over the group into `dinp`: an
  // all-reduce in place, or a reduce-scatter of `whole` to this rank's rows.
  void finish_input_grad(float* whole, float* dinp, int64_t M, int64_t in) const;
};

}  // namespace meshtrain::nn
