#include "meshtrain/nn/linear_shard.hpp"

namespace meshtrain::nn {

Placement LinearShard::weight_placement() const {
  if (kind == Kind::Column) return Placement::sharded(1, tp->size(), tp->rank(), blocks);
  if (kind == Kind::Row) return Placement::sharded(0, tp->size(), tp->rank());
  return {};
}

Placement LinearShard::bias_placement() const {
  return kind == Kind::Column ? Placement::sharded(0, tp->size(), tp->rank(), blocks) : Placement{};
}

int64_t LinearShard::local_rows(int64_t M) const { return sequence_parallel() ? sequence_rows(*tp, M) : M; }

const float* LinearShard::gather_input(const float* inp, int64_t M, int64_t in, DeviceArray<float>& work) const {
  if (!gathers_input()) return inp;
  work.ensure(M * in);
  tp->all_gather(inp, work.raw(), static_cast<size_t>(local_rows(M) * in));  // (M/T, in) -> (M, in)
  return work.raw();
}

float* LinearShard::product_output(float* out, int64_t M, int64_t n, DeviceArray<float>& work) const {
  if (!(sums_output() && sequence_parallel())) return out;
  work.ensure(M * n);
  return work.raw();
}

void LinearShard::finish_output(float* partial, float* out, int64_t M, int64_t n) const {
  if (!sums_output()) return;
  if (sequence_parallel())
    tp->reduce_scatter_sum(partial, out, static_cast<size_t>(local_rows(M) * n));  // -> (M/T, n)
  else
    tp->all_reduce_sum(out, static_cast<size_t>(M * n));
}

const float* LinearShard::gather_output_grad(const float* dout, int64_t M, int64_t n,
                                             DeviceArray<float>& work) const {
  if (!gathers_output_grad()) return dout;
  work.ensure(M * n);
  tp->all_gather(dout, work.raw(), static_cast<size_t>(local_rows(M) * n));  // (M/T, n) -> (M, n)
  return work.raw();
}

void LinearShard::finish_input_grad(float* whole, float* dinp, int64_t M, int64_t in) const {
  if (!sums_input_grad()) return;
  if (sequence_parallel())
    tp->reduce_scatter_sum(whole, dinp, static_cast<size_t>(local_rows(M) * in));  // -> (M/T, in)
  else
    tp->all_reduce_sum(dinp, static_cast<size_t>(M * in));
}

}  // namespace meshtrain::nn
