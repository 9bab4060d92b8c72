#pragma once
// The products of the attention kernels (attention.cpp, flash_attention.cpp),
// on the calling thread: on the bf16 operands when both are given, else on
// the fp32 ones. Internal to kernels/.
#include <cstdint>

#include "meshtrain/kernels/bf16.hpp"
#include "meshtrain/kernels/gemm.hpp"
#include "meshtrain/kernels/gemm_bf16.hpp"

namespace meshtrain::kernels::attention_detail {

struct Operand {
  const float* f32;
  const Bf16* b16;  // null: fp32 products
  int ld;
};

// C = alpha op(a) op(b) + beta C.
inline void product(Trans ta, Trans tb, int M, int N, int K, float alpha, Operand a, Operand b, float* C, int ldc,
                    float beta = 0.0f) {
  if (a.b16 && b.b16)
    gemm_bf16(ta, tb, M, N, K, alpha, a.b16, a.ld, b.b16, b.ld, beta, C, ldc);
  else
    gemm(ta, tb, M, N, K, alpha, a.f32, a.ld, b.f32, b.ld, beta, C, ldc);
}

// p + off, or null for an array not given (under bf16 the fp32 q, k, v and
// the fp32 output may be absent).
template <class T>
T* at(T* p, int64_t off) {
  return p ? p + off : nullptr;
}

}  // namespace meshtrain::kernels::attention_detail
