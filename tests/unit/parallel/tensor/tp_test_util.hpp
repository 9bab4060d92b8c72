#pragma once
// Shared by the tensor-parallel layer tests: ranks as threads, and the
// comparison of a rank's slices with the serial model's tensors.
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "meshtrain/comm/group/process_group.hpp"
#include "meshtrain/comm/transport/inproc/inproc_transport.hpp"
#include "meshtrain/core/error.hpp"
#include "meshtrain/core/param_store.hpp"
#include "meshtrain/parallel/tensor/tensor_parallel_group.hpp"
#include "thread_ranks.hpp"

namespace meshtrain::parallel::tp_test {

// Runs body(rank, group) on `ways` threads, each rank with its tensor-parallel
// group over in-process transports (sequence-parallel or not); returns when
// all are done.
inline void run_tensor_ranks(int ways, const std::function<void(int, TensorParallelGroup&)>& body,
                             bool sequence_parallel = false, Precision wire = Precision::Fp32) {
  testing::on_inproc_ranks(ways, [&](int r, comm::ProcessGroup& group) {
    TensorParallelGroup tp(group, sequence_parallel, wire);
    body(r, tp);
  });
}

// What each rank's body threw as E (empty where it threw nothing): every
// rank of a group must reject a bad layout alike, without waiting on the others.
template <class E = Error>
std::vector<std::string> rank_errors(int ways, const std::function<void(int, TensorParallelGroup&)>& body,
                                     bool sequence_parallel = false) {
  std::vector<std::string> errors(static_cast<size_t>(ways));
  run_tensor_ranks(
      ways,
      [&](int r, TensorParallelGroup& tp) {
        try {
          body(r, tp);
        } catch (const E& e) {
          errors[size_t(r)] = e.what();
        }
      },
      sequence_parallel);
  return errors;
}

// What rank r of `ways` holds of a (rows x width) tensor of the residual
// stream: the whole, or under sequence parallelism its rows [r rows/ways,
// (r+1) rows/ways).
inline std::vector<float> rank_part(const std::vector<float>& whole, int r, int ways, bool sequence_parallel) {
  if (!sequence_parallel) return whole;
  const size_t n = whole.size() / size_t(ways);
  return {whole.begin() + std::ptrdiff_t(size_t(r) * n), whole.begin() + std::ptrdiff_t(size_t(r + 1) * n)};
}

// Elements farther apart than `rel` relative: 1e-5 where sums run in another
// order, 0 where a layer promises the serial bits.
inline size_t mismatches(const float* got, const float* want, size_t n, float rel = 1e-5f) {
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i) bad += !(std::abs(got[i] - want[i]) <= rel * (1.0f + std::abs(want[i])));
  return bad;
}

// Gradient elements of view `v` of `shard` that differ from the serial
// store's gradient of the same tensor at their global indices.
inline size_t grad_slice_mismatches(const ParamStore& shard, const ParamView& v, const ParamStore& serial,
                                    float rel = 1e-5f) {
  const ParamView& w = *serial.find(v.name);
  std::vector<float> want(v.numel);
  for (size_t i = 0; i < v.numel; ++i) want[i] = serial.grads()[w.offset + global_index(v.global_shape, v.placement, i)];
  return mismatches(shard.grads().data() + v.offset, want.data(), v.numel, rel);
}

}  // namespace meshtrain::parallel::tp_test
