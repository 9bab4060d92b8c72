#pragma once
// Token + position embedding (GPT-2's wte and wpe): out[b, t] = wte[tok] + wpe[t].
// Layer conventions: see linear.hpp.
//
// Vocabulary-parallel (Megatron's VocabParallelEmbedding), given a
// tensor-parallel group of TP ranks: wte (V, C) is cut along its rows, each
// rank holding the V/TP rows [rank V/TP, (rank + 1) V/TP). A rank looks up the
// tokens in its range and writes zeros for the others; one all-reduce sum
// over the group then makes the whole (B, T, C) lookup on every rank, and
// wpe (replicated) is added after it, once, the same on every rank. Every
// token's row comes from one rank and the others add exact zeros, so the
// output is bitwise the serial one. Backward needs no communication: dout is
// the same on every rank, and each scatters it into its own rows only.
// V must divide by TP (no padding rows: a padded vocabulary would change the
// tensor's global shape, which checkpoints and the serial model share).
//
// Under sequence parallelism (tensor_parallel.hpp) the sum is a
// reduce-scatter instead: each rank receives its rows [r N/TP, (r+1) N/TP) of
// the lookup (N = B T) and adds wpe to those (row n at position n % T).
// Backward all-gathers dout (N/TP, C) -> (N, C), then runs as above, so wpe's
// gradient is whole on every rank and needs no sum.
#include <cstdint>
#include <string>

#include "meshtrain/core/device_array.hpp"
#include "meshtrain/nn/backend.hpp"
#include "meshtrain/core/param_store.hpp"
#include "meshtrain/core/rng.hpp"
#include "meshtrain/nn/tensor_parallel.hpp"

namespace meshtrain::nn {

class Embedding {
 public:
  // Declares "<wte_name>" (V, C) (with tp: this rank's rows of it) and
  // "<wpe_name>" (max_T, C). Both are weight-decayed, as in nanoGPT/GPT-2
  // training (every 2-D tensor decays). Throws Error when V does not divide
  // by tp's size.
  // wte_unit_alone: wte gets a whole-step unit of its own (ParamStore::
  // close_whole_step_unit), as a pipeline's first stage needs it.
  Embedding(ParamStore& store, const std::string& wte_name, const std::string& wpe_name, int64_t V,
            int64_t max_T, int64_t C, TensorParallelComm* tp = nullptr, bool wte_unit_alone = false);

  // Both ~ N(0, stddev); a wte shard gets its rows of the whole tensor's draws.
  void init(Rng& rng, float stddev);

  // out (B, T, C), under sequence parallelism this rank's rows (B T / TP, C).
  // Throws if T > max_T or a token is outside [0, V).
  float* forward(const int32_t* tokens, int64_t B, int64_t T);

  // dwte, dwpe += scatter of dout (B, T, C) (rows as forward's output).
  void backward(const float* dout);

  size_t wte_index() const { return wte_; }
  // This rank's wte rows [vocab_begin, vocab_begin + vocab_rows) (all V without a group).
  int64_t vocab_begin() const { return v0_; }
  int64_t vocab_rows() const { return V_rows_; }

 private:
  ParamStore& store_;
  int64_t V_, max_T_, C_;
  TensorParallelComm* tp_;
  size_t wte_, wpe_;
  int64_t v0_ = 0, V_rows_;
  const int32_t* tokens_ = nullptr;  // (B, T), borrowed (on the CPU) or tokens_staged_'s
  DeviceArray<int32_t> tokens_staged_{memory_of(store_), MemoryKind::Activations};
  int64_t B_ = 0, T_ = 0;
  DeviceArray<float> out_{memory_of(store_), MemoryKind::Activations};  // (B, T, C); sequence parallelism: (B T / TP, C)
  // Sequence parallelism only: the partial lookup (B, T, C) in forward, the
  // gathered dout (B, T, C) in backward.
  DeviceArray<float> seq_{memory_of(store_), MemoryKind::Activations};
};

}  // namespace meshtrain::nn
