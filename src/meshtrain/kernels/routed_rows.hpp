#pragma once
// The row moves of a mixture-of-experts layer (nn/moe/moe_mlp.cpp), where
// its rows live: tokens gathered into the order they travel to their
// experts in, and the experts' outputs summed back into token order with
// their gates. Rows are C floats, row-major; indices are int32 in the same
// memory as the rows. The arithmetic is routed_rows_math.hpp's, shared with
// the CUDA kernels.
#include <cstdint>

namespace meshtrain::kernels {

// dst row i = src row rows[i], for i < n.
void gather_rows(float* dst, const float* src, const int32_t* rows, int64_t n, int64_t C);

// out row t = base row t (zeros without base) + sum over j in
// [offsets[t], offsets[t + 1]), in that order, of src row rows[j] times its
// scale, scales[rows[j]] (1 without scales); for t < N. out may be base.
void combine_rows(float* out, const float* base, const float* src, const int32_t* offsets, const int32_t* rows,
                  const float* scales, int64_t N, int64_t C);

// For each of n routed rows i, whose token is tokens[i] and gate gates[i]:
// dgates[i] = dout row tokens[i] . y row i (summed in double), and dy row i
// = gates[i] * dout row tokens[i]: the combine's backward.
void gate_backward_rows(float* dy, float* dgates, const float* dout, const float* y, const int32_t* tokens,
                        const float* gates, int64_t n, int64_t C);

}  // namespace meshtrain::kernels
