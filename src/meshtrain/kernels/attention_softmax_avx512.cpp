// Attention's softmax row passes in AVX-512 intrinsics (see
// attention_softmax.hpp).
#include "meshtrain/kernels/attention_softmax.hpp"

// GCC 12 flags its own _mm512_undefined_* helpers as maybe-uninitialized.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include "meshtrain/core/cpu_dispatch.hpp"
#include "meshtrain/kernels/fast_math.hpp"

namespace meshtrain::kernels {
namespace {

// exp(x) for 16 floats: x = n ln2 + r, |r| <= ln2/2, e^r by fast_exp's
// Cephes polynomial, times 2^n by vscalefps.
MESHTRAIN_TARGET_AVX512_BF16 inline __m512 exp16(__m512 x) {
  using namespace cephes_exp;
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(kLog2e)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Hi), x);
  r = _mm512_fmadd_ps(n, _mm512_set1_ps(kLn2Lo), r);
  __m512 p = _mm512_set1_ps(kPoly[0]);
  for (int i = 1; i < 6; ++i) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kPoly[i]));
  const __m512 er = _mm512_add_ps(_mm512_fmadd_ps(_mm512_mul_ps(p, r), r, r), _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(er, n);
}

// The bf16 at p[0..16) in lanes m, widened (a bf16's bits are the float's
// top half); 0 elsewhere.
MESHTRAIN_TARGET_AVX512_BF16 inline __m512 widened(__mmask16 m, const Bf16* p) {
  const __m256i bits = _mm256_maskz_loadu_epi16(m, p);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
}

// Lanes [0, k) of a 16-lane vector, k in 1..16.
inline __mmask16 first_lanes(int64_t k) { return k >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << k) - 1); }

}  // namespace

MESHTRAIN_TARGET_AVX512_BF16 void softmax_rows_rounded_avx512(float* s, int64_t r0, int64_t r1, int64_t T, bool causal,
                                                      Bf16* p16) {
  const __m512 lowest = _mm512_set1_ps(-__builtin_huge_valf());
  for (int64_t t = r0; t < r1; ++t) {
    float* row = s + (t - r0) * T;
    Bf16* out = p16 + (t - r0) * T;
    const int64_t n = causal ? t + 1 : T;
    __m512 mx = lowest;
    for (int64_t j = 0; j < n; j += 16)
      mx = _mm512_max_ps(mx, _mm512_mask_loadu_ps(lowest, first_lanes(n - j), row + j));
    const __m512 vmax = _mm512_set1_ps(_mm512_reduce_max_ps(mx));
    __m512 sum = _mm512_setzero_ps();
    for (int64_t j = 0; j < n; j += 16) {
      const __mmask16 m = first_lanes(n - j);
      const __m512 e = _mm512_maskz_mov_ps(m, exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, row + j), vmax)));
      _mm512_storeu_ps(row + j, e);  // lanes past n are 0 (T is a multiple of 16)
      sum = _mm512_add_ps(sum, e);
    }
    const __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(sum));
    int64_t j = 0;
    for (; j < n; j += 16) {  // zeros past n come out as 0 * inv
      const __m256bh p = _mm512_cvtneps_pbh(_mm512_mul_ps(_mm512_loadu_ps(row + j), inv));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + j), (__m256i)p);
    }
    for (; j < T; j += 16) _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + j), _mm256_setzero_si256());
  }
}

MESHTRAIN_TARGET_AVX512_BF16 void softmax_backward_rows_rounded_avx512(const float* dp, const Bf16* p16, int64_t r0,
                                                                int64_t r1, int64_t T, bool causal, float scale,
                                                                Bf16* ds16) {
  const __m512 vscale = _mm512_set1_ps(scale);
  for (int64_t t = r0; t < r1; ++t) {
    const float* dr = dp + (t - r0) * T;
    const Bf16* pr = p16 + (t - r0) * T;
    Bf16* out = ds16 + (t - r0) * T;
    const int64_t n = causal ? t + 1 : T, end = causal ? r1 : T;
    __m512 dot = _mm512_setzero_ps();
    for (int64_t j = 0; j < n; j += 16) {
      const __mmask16 m = first_lanes(n - j);
      dot = _mm512_fmadd_ps(widened(m, pr + j), _mm512_maskz_loadu_ps(m, dr + j), dot);
    }
    const __m512 vdot = _mm512_set1_ps(_mm512_reduce_add_ps(dot));
    int64_t j = 0;
    for (; j < n; j += 16) {  // lanes past n written as zeros
      const __mmask16 m = first_lanes(n - j);
      const __m512 diff = _mm512_sub_ps(_mm512_maskz_loadu_ps(m, dr + j), vdot);
      const __m512 d = _mm512_maskz_mov_ps(m, _mm512_mul_ps(_mm512_mul_ps(widened(m, pr + j), diff), vscale));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + j), (__m256i)_mm512_cvtneps_pbh(d));
    }
    for (; j < end; j += 16) _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + j), _mm256_setzero_si256());
  }
}

}  // namespace meshtrain::kernels
