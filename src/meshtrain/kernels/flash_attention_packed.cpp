#include "meshtrain/kernels/flash_attention_packed.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "meshtrain/kernels/bf16_pair_products.hpp"
#include "meshtrain/kernels/flash_attention_rows.hpp"

namespace meshtrain::kernels::flash_detail {

namespace pp = pair_products;
using pp::words;

namespace {

// C = A B, or C += A B when `add`.
void product_into(bool add, int M, int N, int KP, pp::PackedA a, const uint32_t* b, int ldb, float* c, int ldc) {
  if (add)
    pp::product_accumulate(M, N, KP, a, b, ldb, c, ldc);
  else
    pp::product(M, N, KP, 1.0f, a, b, ldb, c, ldc);
}

}  // namespace

bool flash_packed_products(const AttentionBf16* bf16, int64_t T, int64_t hs) {
  return bf16 && bf16->out && T % 16 == 0 && hs % 16 == 0 && detail::packed_attention_products_allowed() &&
         pp::available();
}

void flash_forward_packed(float* lse, const AttentionBf16& bf16, int64_t B, int64_t T, int64_t C, int64_t NH,
                          bool causal) {
  const int64_t hs = C / NH;
  const int ti = int(T), hi = int(hs), ld3 = int(3 * C);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
#pragma omp parallel for schedule(static)
  for (int64_t bh = 0; bh < B * NH; ++bh) {
    const int64_t b = bh / NH, h = bh % NH;
    const Bf16* q16 = bf16.qkv + b * T * 3 * C + h * hs;
    // k^T (hs/2 x T words) and v (T/2 x hs), once for every row block.
    thread_local std::vector<uint32_t> kt_buf, v_buf;
    thread_local std::vector<float> s, acc, m, l;
    thread_local std::vector<Bf16> p16;
    uint32_t* kt = words(kt_buf, hs / 2 * T);
    uint32_t* vp = words(v_buf, T / 2 * hs);
    pp::pack_transposed(q16 + C, ti, hi, ld3, kt, ti);
    pp::pack_row_pairs(q16 + 2 * C, ti, hi, ld3, vp, hi);
    s.resize(size_t(kForwardRows * kForwardKeys));
    p16.resize(s.size());
    for (int64_t r0 = 0; r0 < T; r0 += kForwardRows) {
      const int64_t rows = std::min(kForwardRows, T - r0);
      acc.assign(size_t(rows * hs), 0.0f);
      m.assign(size_t(rows), -INFINITY);
      l.assign(size_t(rows), 0.0f);
      const int64_t keys_end = causal ? r0 + rows : T;
      for (int64_t j0 = 0; j0 < keys_end; j0 += kForwardKeys) {
        const int64_t nk = std::min(kForwardKeys, keys_end - j0);
        pp::product(int(rows), int(nk), hi / 2, scale, pp::row_major(q16 + r0 * 3 * C, ld3), kt + j0, ti, s.data(),
                    int(kForwardKeys));
        online_softmax_block(s.data(), kForwardKeys, rows, nk, r0, j0, causal, m.data(), l.data(), acc.data(), hs,
                             p16.data());
        pp::product_accumulate(int(rows), hi, int(nk / 2), pp::row_major(p16.data(), int(kForwardKeys)),
                               vp + j0 / 2 * hs, hi, acc.data(), hi);
      }
      finish_rows(acc.data(), m.data(), l.data(), rows, r0, hs, C, nullptr, bf16.out + b * T * C + h * hs,
                  lse + bh * T);
    }
  }
}

void flash_backward_packed(float* dqkv, const float* lse, const AttentionBf16& bf16, int64_t B, int64_t T, int64_t C,
                           int64_t NH, bool causal) {
  const int64_t hs = C / NH, n = kBackwardBlock;
  const int ti = int(T), hi = int(hs), ld3 = int(3 * C), ldc = int(C), ni = int(n);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
#pragma omp parallel for schedule(static)
  for (int64_t bh = 0; bh < B * NH; ++bh) {
    const int64_t b = bh / NH, h = bh % NH;
    const int64_t head = b * T * 3 * C + h * hs, head_out = b * T * C + h * hs;
    const Bf16 *q16 = bf16.qkv + head, *dy16 = bf16.dout + head_out;
    float* dq = dqkv + head;
    float* dk = dq + C;
    float* dv = dq + 2 * C;
    // Packed once per head: k^T and v^T for the products with k and v on the
    // right of a row block (s, dp); k, q and dy in pairs of rows for those
    // that reduce over keys or queries (dq, dk, dv).
    thread_local std::vector<uint32_t> kt_buf, vt_buf, k_buf, q_buf, dy_buf, pb_buf, dsb_buf;
    thread_local std::vector<float> D, s, dp;
    thread_local std::vector<Bf16> p16, ds16;
    uint32_t* kt = words(kt_buf, hs / 2 * T);
    uint32_t* vt = words(vt_buf, hs / 2 * T);
    uint32_t* kp = words(k_buf, T / 2 * hs);
    uint32_t* qp = words(q_buf, T / 2 * hs);
    uint32_t* dyp = words(dy_buf, T / 2 * hs);
    uint32_t* pb = words(pb_buf, n / 2 * n);   // the block's p in pairs of query rows
    uint32_t* dsb = words(dsb_buf, n / 2 * n);  // and its ds
    pp::pack_transposed(q16 + C, ti, hi, ld3, kt, ti);
    pp::pack_transposed(q16 + 2 * C, ti, hi, ld3, vt, ti);
    pp::pack_row_pairs(q16 + C, ti, hi, ld3, kp, hi);
    pp::pack_row_pairs(q16, ti, hi, ld3, qp, hi);
    pp::pack_row_pairs(dy16, ti, hi, ldc, dyp, hi);
    D.resize(size_t(T));
    s.resize(size_t(n * n));
    dp.resize(s.size());
    p16.resize(s.size());
    ds16.resize(s.size());
    output_dots(D.data(), nullptr, nullptr, dy16, bf16.out + head_out, T, C, hs);
    const float* lse_head = lse + bh * T;
    for (int64_t j0 = 0; j0 < T; j0 += n) {
      const int64_t nk = std::min(n, T - j0);
      const int nki = int(nk);
      for (int64_t r0 = causal ? j0 : 0; r0 < T; r0 += n) {
        const int64_t rows = std::min(n, T - r0);
        const int ri = int(rows);
        const bool add_keys = r0 != (causal ? j0 : 0), add_rows = j0 != 0;
        pp::product(ri, nki, hi / 2, scale, pp::row_major(q16 + r0 * 3 * C, ld3), kt + j0, ti, s.data(), ni);
        probabilities_block(s.data(), n, rows, nk, r0, j0, causal, lse_head, p16.data());
        // dv[j0:] (+)= p^T dy[r0:]: p^T's pairs run down p's columns.
        pp::pack_row_pairs(p16.data(), ri, nki, ni, pb, ni);
        product_into(add_keys, nki, hi, ri / 2, pp::PackedA{pb, 1, n}, dyp + r0 / 2 * hs, hi, dv + j0 * 3 * C, ld3);
        // dp = dy[r0:] v[j0:]^T, then ds
        pp::product(ri, nki, hi / 2, 1.0f, pp::row_major(dy16 + r0 * C, ldc), vt + j0, ti, dp.data(), ni);
        score_gradients_block(dp.data(), s.data(), n, rows, nk, r0, D.data(), scale, ds16.data());
        // dq[r0:] (+)= ds k[j0:];  dk[j0:] (+)= ds^T q[r0:]
        product_into(add_rows, ri, hi, nki / 2, pp::row_major(ds16.data(), ni), kp + j0 / 2 * hs, hi,
                     dq + r0 * 3 * C, ld3);
        pp::pack_row_pairs(ds16.data(), ri, nki, ni, dsb, ni);
        product_into(add_keys, nki, hi, ri / 2, pp::PackedA{dsb, 1, n}, qp + r0 / 2 * hs, hi, dk + j0 * 3 * C, ld3);
      }
    }
  }
}

}  // namespace meshtrain::kernels::flash_detail
