// Packed, cache-blocked AVX-512 SGEMM in the GotoBLAS/BLIS scheme.
//
// Terms (all for row-major C = alpha * op(A) * op(B) + beta * C):
//   tile    MR x NR block of C held in 28 zmm accumulators (14 rows x 2 zmm).
//   A panel MR rows of op(A) over kc steps of K, packed k-major: for each k
//           the MR values a(i, k) side by side, so one broadcast per row.
//   B panel NR columns of op(B) over kc steps, packed k-major: for each k the
//           NR values b(k, j) contiguous, so two aligned zmm loads.
//   KC      depth of one pass over K; an A panel (MR x KC) stays in L1.
//   NC      columns of op(B) packed at once; the B block (KC x NC) stays in
//           L2 and is streamed through by every A panel.
//   MC      rows of op(A) packed at once; the A block (MC x KC) sits in L3.
//
// Loop nest: ic (MC) > pc (KC, packs A) > jc (NC, packs B) > ir (MR) > jr
// (NR) > microkernel. (BLIS's order with A and B swapped: here the broadcast
// operand is A, so its panel is the one held in L1.) Packing turns every transpose/leading-dim case into the
// same two contiguous streams, so the microkernel has one form. Rows and
// columns past the edge of C are zero in the panels and masked at the store.
//
// Every function that uses AVX-512 carries the target attribute, so this file
// builds with any -march; gemm.cpp calls it only after a CPU check.
#include "meshtrain/kernels/gemm_avx512.hpp"

// GCC 12 flags its own _mm512_undefined_* helpers as maybe-uninitialized.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "meshtrain/core/aligned_buffer.hpp"

#define MESHTRAIN_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,fma")))

namespace meshtrain::kernels::detail {
namespace {

constexpr int MR = kGemmMR;
constexpr int NR = kGemmNR;
static_assert(NR == 32, "the microkernel holds a tile row in two zmm registers");

GemmBlocking g_blocking{};  // defaults in the header; the bench may retune

// Packing scratch, one per thread, allocated on first use and reused: fresh
// pages cost ~12 us each on our VMs, more than a small GEMM.
struct Scratch {
  AlignedBuffer<float> a{MemoryKind::Other};  // (MC/MR) panels of KC x MR
  AlignedBuffer<float> b{MemoryKind::Other};  // (NC/NR) panels of KC x NR
};
Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

MESHTRAIN_AVX512 inline __mmask16 lane_mask(int n) { return n >= 16 ? __mmask16(0xFFFF) : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1); }

// ---- packing ---------------------------------------------------------------

// In place: r[k][i] <- r[i][k] for a 16 x 16 block held in 16 zmm rows.
MESHTRAIN_AVX512 inline void transpose16(__m512 r[16]) {
  __m512 t[16], u[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int q = 0; q < 4; ++q) {
    __m512 *a = t + 4 * q, *o = u + 4 * q;
    o[0] = _mm512_shuffle_ps(a[0], a[2], _MM_SHUFFLE(1, 0, 1, 0));
    o[1] = _mm512_shuffle_ps(a[0], a[2], _MM_SHUFFLE(3, 2, 3, 2));
    o[2] = _mm512_shuffle_ps(a[1], a[3], _MM_SHUFFLE(1, 0, 1, 0));
    o[3] = _mm512_shuffle_ps(a[1], a[3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int h = 0; h < 2; ++h)
    for (int i = 0; i < 4; ++i) {
      t[8 * h + i] = _mm512_shuffle_f32x4(u[8 * h + i], u[8 * h + 4 + i], 0x88);
      t[8 * h + 4 + i] = _mm512_shuffle_f32x4(u[8 * h + i], u[8 * h + 4 + i], 0xdd);
    }
  for (int i = 0; i < 8; ++i) {
    r[i] = _mm512_shuffle_f32x4(t[i], t[8 + i], 0x88);
    r[8 + i] = _mm512_shuffle_f32x4(t[i], t[8 + i], 0xdd);
  }
}

// Packs op(A)[i0 : i0+mc, p0 : p0+kc] into ceil(mc/MR) panels of kc x MR.
MESHTRAIN_AVX512 void pack_a(Trans ta, const float* A, int lda, int i0, int mc, int p0, int kc, float* dst) {
  const __mmask16 panel_row = lane_mask(MR);
  for (int ir = 0; ir < mc; ir += MR) {
    int mr = std::min(MR, mc - ir);
    float* panel = dst + static_cast<size_t>(ir) * kc;  // (kc, MR)
    if (ta == Trans::No) {
      // a(i, k) = A[(i0+ir+i) * lda + p0 + k]: rows contiguous in k, so
      // transpose 16 k at a time (rows past mr are zero).
      const float* rows = A + static_cast<size_t>(i0 + ir) * lda + p0;
      int k = 0;
      for (; k + 16 <= kc; k += 16) {
        __m512 r[16];
        for (int i = 0; i < 16; ++i)
          r[i] = i < mr ? _mm512_loadu_ps(rows + static_cast<size_t>(i) * lda + k) : _mm512_setzero_ps();
        transpose16(r);
        for (int kk = 0; kk < 16; ++kk) _mm512_mask_storeu_ps(panel + (k + kk) * MR, panel_row, r[kk]);
      }
      for (; k < kc; ++k)
        for (int i = 0; i < MR; ++i) panel[k * MR + i] = i < mr ? rows[static_cast<size_t>(i) * lda + k] : 0.0f;
    } else {
      // a(i, k) = A[(p0+k) * lda + i0+ir+i]: each k contiguous in i.
      const __mmask16 m = lane_mask(mr);
      for (int k = 0; k < kc; ++k) {
        const float* src = A + static_cast<size_t>(p0 + k) * lda + i0 + ir;
        _mm512_mask_storeu_ps(panel + k * MR, panel_row, _mm512_maskz_loadu_ps(m, src));
      }
    }
  }
}

// Packs op(B)[p0 : p0+kc, j0 : j0+nc] into ceil(nc/NR) panels of kc x NR.
MESHTRAIN_AVX512 void pack_b(Trans tb, const float* B, int ldb, int p0, int kc, int j0, int nc, float* dst) {
  for (int jr = 0; jr < nc; jr += NR) {
    int nr = std::min(NR, nc - jr);
    float* panel = dst + static_cast<size_t>(jr) * kc;  // (kc, NR)
    if (tb == Trans::No) {
      // b(k, j) = B[(p0+k) * ldb + j0+jr+j]: each k is one contiguous row slice.
      __mmask16 m0 = lane_mask(nr), m1 = lane_mask(nr - 16);
      for (int k = 0; k < kc; ++k) {
        const float* src = B + static_cast<size_t>(p0 + k) * ldb + j0 + jr;
        _mm512_store_ps(panel + k * NR, _mm512_maskz_loadu_ps(m0, src));
        _mm512_store_ps(panel + k * NR + 16, _mm512_maskz_loadu_ps(m1, src + 16));
      }
    } else {
      // b(k, j) = B[(j0+jr+j) * ldb + p0+k]: columns contiguous in k, so
      // transpose 16 columns x 16 k at a time (columns past nr are zero).
      const float* cols = B + static_cast<size_t>(j0 + jr) * ldb + p0;
      int k = 0;
      for (; k + 16 <= kc; k += 16)
        for (int h = 0; h < NR; h += 16) {
          __m512 r[16];
          for (int j = 0; j < 16; ++j)
            r[j] = h + j < nr ? _mm512_loadu_ps(cols + static_cast<size_t>(h + j) * ldb + k) : _mm512_setzero_ps();
          transpose16(r);
          for (int kk = 0; kk < 16; ++kk) _mm512_store_ps(panel + (k + kk) * NR + h, r[kk]);
        }
      for (; k < kc; ++k)
        for (int j = 0; j < NR; ++j) panel[k * NR + j] = j < nr ? cols[static_cast<size_t>(j) * ldb + k] : 0.0f;
    }
  }
}

// ---- microkernel -------------------------------------------------------------

// C[0:mr, 0:nr] = alpha * (Ap * Bp) + beta * C, Ap (kc, MR), Bp (kc, NR).
// beta == 0 never reads C, so NaN garbage there is overwritten.
MESHTRAIN_AVX512 void microkernel(int kc, const float* __restrict Ap, const float* __restrict Bp, float* C,
                                  int ldc, float alpha, float beta, int mr, int nr) {
  __m512 acc0[MR], acc1[MR];
#pragma GCC unroll 14
  for (int i = 0; i < MR; ++i) acc0[i] = acc1[i] = _mm512_setzero_ps();
  // Fetch the C tile now, so its misses (C is often bigger than L2 and
  // revisited once per K pass) overlap the K loop instead of stalling the store.
  for (int i = 0; i < mr; ++i) {
    _mm_prefetch(reinterpret_cast<const char*>(C + static_cast<size_t>(i) * ldc), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(C + static_cast<size_t>(i) * ldc + nr - 1), _MM_HINT_T0);
  }

  for (int k = 0; k < kc; ++k) {
    __m512 b0 = _mm512_load_ps(Bp);
    __m512 b1 = _mm512_load_ps(Bp + 16);
    _mm_prefetch(reinterpret_cast<const char*>(Ap + 8 * MR), _MM_HINT_T0);
#pragma GCC unroll 14
    for (int i = 0; i < MR; ++i) {
      __m512 a = _mm512_set1_ps(Ap[i]);
      acc0[i] = _mm512_fmadd_ps(a, b0, acc0[i]);
      acc1[i] = _mm512_fmadd_ps(a, b1, acc1[i]);
    }
    Ap += MR;
    Bp += NR;
  }

  __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  __mmask16 m0 = lane_mask(nr), m1 = lane_mask(nr - 16);
  if (mr == MR && nr == NR) {
#pragma GCC unroll 14
    for (int i = 0; i < MR; ++i) {
      float* c = C + static_cast<size_t>(i) * ldc;
      __m512 r0 = _mm512_mul_ps(va, acc0[i]), r1 = _mm512_mul_ps(va, acc1[i]);
      if (beta != 0.0f) {
        r0 = _mm512_fmadd_ps(vb, _mm512_loadu_ps(c), r0);
        r1 = _mm512_fmadd_ps(vb, _mm512_loadu_ps(c + 16), r1);
      }
      _mm512_storeu_ps(c, r0);
      _mm512_storeu_ps(c + 16, r1);
    }
    return;
  }
#pragma GCC unroll 14
  for (int i = 0; i < MR; ++i) {
    if (i >= mr) break;
    float* c = C + static_cast<size_t>(i) * ldc;
    __m512 r0 = _mm512_mul_ps(va, acc0[i]), r1 = _mm512_mul_ps(va, acc1[i]);
    if (beta != 0.0f) {
      r0 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m0, c), r0);
      r1 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m1, c + 16), r1);
    }
    _mm512_mask_storeu_ps(c, m0, r0);
    _mm512_mask_storeu_ps(c + 16, m1, r1);
  }
}

}  // namespace

bool avx512_gemm_supported() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("fma");
}

GemmBlocking gemm_blocking() { return g_blocking; }
void set_gemm_blocking(GemmBlocking b) {
  b.mc = std::max(MR, b.mc / MR * MR);
  b.nc = std::max(NR, b.nc / NR * NR);
  b.kc = std::max(1, b.kc);
  g_blocking = b;
}

MESHTRAIN_AVX512 void gemm_avx512_st(Trans trans_a, Trans trans_b, int M, int N, int K, float alpha,
                                     const float* A, int lda, const float* B, int ldb, float beta, float* C,
                                     int ldc) {
  const GemmBlocking blk = g_blocking;
  // Blocks never exceed the problem (rounded up to whole panels), so small
  // GEMMs touch little scratch.
  const int KC = std::min(blk.kc, std::max(K, 1));
  const int MC = std::min(blk.mc, (M + MR - 1) / MR * MR);
  const int NC = std::min(blk.nc, (N + NR - 1) / NR * NR);
  Scratch& s = scratch();
  s.a.ensure(static_cast<size_t>(MC) * KC);
  s.b.ensure(static_cast<size_t>(NC) * KC);
  float* Ap = s.a.data();
  float* Bp = s.b.data();

  if (K == 0) {  // C = beta * C; beta == 0 clears NaN garbage
    for (int i = 0; i < M; ++i) {
      float* c = C + static_cast<size_t>(i) * ldc;
      if (beta == 0.0f) std::memset(c, 0, sizeof(float) * N);
      else for (int j = 0; j < N; ++j) c[j] *= beta;
    }
    return;
  }

  for (int ic = 0; ic < M; ic += MC) {
    const int mc = std::min(MC, M - ic);
    for (int pc = 0; pc < K; pc += KC) {
      const int kc = std::min(KC, K - pc);
      const float beta_pass = pc == 0 ? beta : 1.0f;  // later K passes accumulate
      pack_a(trans_a, A, lda, ic, mc, pc, kc, Ap);
      for (int jc = 0; jc < N; jc += NC) {
        const int nc = std::min(NC, N - jc);
        pack_b(trans_b, B, ldb, pc, kc, jc, nc, Bp);
        for (int ir = 0; ir < mc; ir += MR) {
          const int mr = std::min(MR, mc - ir);
          const float* ap = Ap + static_cast<size_t>(ir) * kc;
          for (int jr = 0; jr < nc; jr += NR) {
            const int nr = std::min(NR, nc - jr);
            float* c = C + static_cast<size_t>(ic + ir) * ldc + jc + jr;
            microkernel(kc, ap, Bp + static_cast<size_t>(jr) * kc, c, ldc, alpha, beta_pass, mr, nr);
          }
        }
      }
    }
  }
}

}  // namespace meshtrain::kernels::detail
