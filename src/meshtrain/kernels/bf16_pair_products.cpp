// vdpbf16ps products on operands packed in pairs (see bf16_pair_products.hpp).
//
// Register tile: up to 6 rows x 4 vectors of 16 columns, 24 accumulators,
// 4 B vectors and one broadcast A word: 29 of the 32 zmm registers. Each kp
// step loads 4 B vectors and 6 A words for 24 vdpbf16ps.
#include "meshtrain/kernels/bf16_pair_products.hpp"

#include <cstring>

// GCC 12 flags its own _mm512_undefined_* helpers as maybe-uninitialized.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include "meshtrain/core/cpu_dispatch.hpp"


namespace meshtrain::kernels::pair_products {
namespace {

constexpr int kRows = 6;     // rows of C per register tile
constexpr int kVectors = 4;  // 16-column vectors of C per register tile

// A word of A: the caller's arrays are bf16 (or packed words); memcpy reads
// it without breaking type aliasing (one load).
inline uint32_t word_at(const uint32_t* p) {
  uint32_t w;
  std::memcpy(&w, p, sizeof w);
  return w;
}

template <int MR, int NV, bool kRounded>
MESHTRAIN_TARGET_AVX512_BF16 void tile(int KP, float alpha, PackedA a, const uint32_t* b, int ldb, void* c, int ldc,
                                       __mmask16 last, bool stream, bool accumulate) {
  // Every loop over the tile unrolled, so the accumulators live in
  // registers (GCC otherwise keeps the array on the stack).
  const bool full = last == __mmask16(0xFFFF);
  __m512 acc[MR][NV];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      const float* row = static_cast<const float*>(c) + int64_t(i) * ldc + 16 * v;  // fp32 C only
      acc[i][v] = !accumulate                 ? _mm512_setzero_ps()
                  : v == NV - 1 && !full ? _mm512_maskz_loadu_ps(last, row)
                                              : _mm512_loadu_ps(row);
    }
  for (int kp = 0; kp < KP; ++kp) {
    const uint32_t* brow = b + int64_t(kp) * ldb;
    __m512bh bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v)  // the last vector only up to column N
      bv[v] = (__m512bh)(v == NV - 1 && !full ? _mm512_maskz_loadu_epi32(last, brow + 16 * v)
                                               : _mm512_loadu_si512(brow + 16 * v));
    const uint32_t* acol = a.a + int64_t(kp) * a.pair;
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const __m512bh av = (__m512bh)_mm512_set1_epi32(static_cast<int>(word_at(acol + i * a.row)));
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_dpbf16_ps(acc[i][v], av, bv[v]);
    }
  }
  // Masked stores only for a partial last vector: they are slow even with
  // a full mask (Zen 4).
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      const bool masked = v == NV - 1 && !full;
      if constexpr (kRounded) {
        Bf16* row = static_cast<Bf16*>(c) + int64_t(i) * ldc + 16 * v;
        const __m256i r = (__m256i)_mm512_cvtneps_pbh(acc[i][v]);
        if (masked)
          _mm256_mask_storeu_epi16(row, last, r);
        else
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(row), r);
      } else {
        float* row = static_cast<float*>(c) + int64_t(i) * ldc + 16 * v;
        const __m512 r = alpha == 1.0f ? acc[i][v] : _mm512_mul_ps(acc[i][v], _mm512_set1_ps(alpha));
        if (masked)
          _mm512_mask_storeu_ps(row, last, r);
        else if (stream && (reinterpret_cast<uintptr_t>(row) & 63) == 0)
          _mm512_stream_ps(row, r);
        else
          _mm512_storeu_ps(row, r);
      }
    }
}

MESHTRAIN_TARGET_AVX512_BF16 void store_fence() { _mm_sfence(); }

// The tile function for MR rows (1..kRows) and NV vectors (1..kVectors).
template <bool kRounded>
using TileFn = void (*)(int, float, PackedA, const uint32_t*, int, void*, int, __mmask16, bool, bool);

template <bool kRounded, int MR>
TileFn<kRounded> tile_for_vectors(int nv) {
  switch (nv) {
    case 1: return tile<MR, 1, kRounded>;
    case 2: return tile<MR, 2, kRounded>;
    case 3: return tile<MR, 3, kRounded>;
    default: return tile<MR, 4, kRounded>;
  }
}

template <bool kRounded>
TileFn<kRounded> tile_for(int mr, int nv) {
  switch (mr) {
    case 1: return tile_for_vectors<kRounded, 1>(nv);
    case 2: return tile_for_vectors<kRounded, 2>(nv);
    case 3: return tile_for_vectors<kRounded, 3>(nv);
    case 4: return tile_for_vectors<kRounded, 4>(nv);
    case 5: return tile_for_vectors<kRounded, 5>(nv);
    default: return tile_for_vectors<kRounded, 6>(nv);
  }
}

template <bool kRounded>
void run(int M, int N, int KP, float alpha, PackedA a, const uint32_t* b, int ldb, void* c, int ldc,
         bool stream = false, bool accumulate = false) {
  constexpr size_t elem = kRounded ? sizeof(Bf16) : sizeof(float);
  for (int n0 = 0; n0 < N; n0 += 16 * kVectors) {
    const int cols = N - n0 < 16 * kVectors ? N - n0 : 16 * kVectors;
    const int nv = (cols + 15) / 16;
    const __mmask16 last = cols % 16 ? __mmask16((1u << (cols % 16)) - 1) : __mmask16(0xFFFF);
    for (int i0 = 0; i0 < M; i0 += kRows) {
      const int mr = M - i0 < kRows ? M - i0 : kRows;
      const PackedA rows{a.a + int64_t(i0) * a.row, a.row, a.pair};
      void* c_tile = static_cast<char*>(c) + (int64_t(i0) * ldc + n0) * int64_t(elem);
      tile_for<kRounded>(mr, nv)(KP, alpha, rows, b + n0, ldb, c_tile, ldc, last, stream, accumulate);
    }
  }
  if (stream) store_fence();  // streamed lines visible before anyone reads them
}

}  // namespace

bool available() {
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bf16");
  return has;
}

// The packing loops compiled for AVX-512 too: only a CPU with it calls them.
MESHTRAIN_TARGET_AVX512_BF16 void pack_row_pairs(const Bf16* src, int K, int N, int ld, uint32_t* dst, int ldp) {
  for (int kp = 0; kp < K / 2; ++kp) {
    const Bf16* lo = src + int64_t(2 * kp) * ld;
    const Bf16* hi = lo + ld;
    uint32_t* out = dst + int64_t(kp) * ldp;
    int n = 0;
    for (; n + 16 <= N; n += 16) {  // 16 words: the low row's 16 bits zero-extended, the high row's above them
      const __m512i l = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(lo + n)));
      const __m512i h = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(hi + n)));
      _mm512_storeu_si512(out + n, _mm512_or_si512(l, _mm512_slli_epi32(h, 16)));
    }
    for (; n < N; ++n) out[n] = uint32_t(lo[n].bits) | uint32_t(hi[n].bits) << 16;
  }
}

MESHTRAIN_TARGET_AVX512_BF16 void pack_transposed(const Bf16* src, int N, int K, int ld, uint32_t* dst, int ldp) {
  // 16 source rows at a time: word kp of each gathered into one vector.
  const __m512i rows16 = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                            _mm512_set1_epi32(ld / 2));
  int n0 = 0;
  for (; n0 + 16 <= N; n0 += 16) {
    const Bf16* block = src + int64_t(n0) * ld;
    for (int kp = 0; kp < K / 2; ++kp)
      _mm512_storeu_si512(dst + int64_t(kp) * ldp + n0, _mm512_i32gather_epi32(rows16, block + 2 * kp, 4));
  }
  for (; n0 < N; n0 += 16) {
    const int rows = N - n0 < 16 ? N - n0 : 16;
    for (int kp = 0; kp < K / 2; ++kp) {
      uint32_t* out = dst + int64_t(kp) * ldp + n0;
      for (int r = 0; r < rows; ++r) {
        const Bf16* x = src + int64_t(n0 + r) * ld + 2 * kp;
        out[r] = uint32_t(x[0].bits) | uint32_t(x[1].bits) << 16;
      }
    }
  }
}

void product(int M, int N, int KP, float alpha, PackedA a, const uint32_t* b, int ldb, float* c, int ldc) {
  run<false>(M, N, KP, alpha, a, b, ldb, c, ldc);
}

void product_streamed(int M, int N, int KP, PackedA a, const uint32_t* b, int ldb, float* c, int ldc) {
  run<false>(M, N, KP, 1.0f, a, b, ldb, c, ldc, /*stream=*/true);
}

void product_rounded(int M, int N, int KP, PackedA a, const uint32_t* b, int ldb, Bf16* c, int ldc) {
  run<true>(M, N, KP, 1.0f, a, b, ldb, c, ldc);
}

void product_accumulate(int M, int N, int KP, PackedA a, const uint32_t* b, int ldb, float* c, int ldc) {
  run<false>(M, N, KP, 1.0f, a, b, ldb, c, ldc, /*stream=*/false, /*accumulate=*/true);
}

}  // namespace meshtrain::kernels::pair_products
