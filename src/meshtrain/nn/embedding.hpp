#pragma once
// Token + position embedding (GPT-2's wte and wpe): out[b, t] = wte[tok] + wpe[t].
// Layer conventions: see linear.hpp.
#include <cstdint>
#include <string>

#include "meshtrain/core/aligned_buffer.hpp"
#include "meshtrain/core/param_store.hpp"
#include "meshtrain/core/rng.hpp"

namespace meshtrain::nn {

class Embedding {
 public:
  // Declares "<wte_name>" (V, C) and "<wpe_name>" (max_T, C). Both are
  // weight-decayed, as in nanoGPT/GPT-2 training (every 2-D tensor decays).
  Embedding(ParamStore& store, const std::string& wte_name, const std::string& wpe_name, int64_t V,
            int64_t max_T, int64_t C);

  // Both ~ N(0, stddev).
  void init(Rng& rng, float stddev);

  // out (B, T, C). Throws if T > max_T or a token is outside [0, V).
  float* forward(const int32_t* tokens, int64_t B, int64_t T);

  // dwte, dwpe += scatter of dout (B, T, C).
  void backward(const float* dout);

  size_t wte_index() const { return wte_; }

 private:
  ParamStore& store_;
  int64_t V_, max_T_, C_;
  size_t wte_, wpe_;
  const int32_t* tokens_ = nullptr;  // (B, T), borrowed
  int64_t B_ = 0, T_ = 0;
  AlignedBuffer<float> out_{MemoryKind::Activations};  // (B, T, C)
};

}  // namespace meshtrain::nn
