#include "meshtrain/kernels/attention.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <vector>

#include "meshtrain/core/cpu_dispatch.hpp"
#include "meshtrain/kernels/attention_products.hpp"
#include "meshtrain/kernels/attention_softmax.hpp"
#include "meshtrain/kernels/bf16_pair_products.hpp"
#include "meshtrain/kernels/gemm.hpp"
#include "meshtrain/kernels/gemm_bf16.hpp"

namespace meshtrain::kernels {

namespace {

using attention_detail::at;
using attention_detail::Operand;
using attention_detail::product;

namespace pp = pair_products;
using pp::words;

std::atomic<bool> packed_products_allowed{true};

// Under bf16, on a CPU with vdpbf16ps and shapes whose row blocks, keys and
// head columns come in whole vectors of 16, the products run on operands
// packed once per head (bf16_pair_products.hpp) instead of through oneDNN.
bool packed_products(const AttentionBf16* bf16, int64_t T, int64_t hs) {
  return bf16 && T % 16 == 0 && hs % 16 == 0 && packed_products_allowed.load(std::memory_order_relaxed) &&
         pp::available();
}

}  // namespace

const char* attention_bf16_products_name() {
  return pp::available() ? "vdpbf16ps on operands packed per head where head size and sequence length are "
                           "multiples of 16, else oneDNN"
                         : "oneDNN (gemm_bf16)";
}

namespace detail {
void allow_packed_attention_products(bool allowed) { packed_products_allowed.store(allowed); }
bool packed_attention_products_allowed() { return packed_products_allowed.load(std::memory_order_relaxed); }
}  // namespace detail

// Causal attention is computed in blocks of kRowBlock query rows: rows
// [r0, r1) only meet keys [0, r1), so the gemms skip most of the masked upper
// triangle (at T = 256, 10/16 of the full work). Non-causal uses one block.
constexpr int64_t kRowBlock = 64;

MESHTRAIN_HOT_LOOP
void attention_forward(float* out, float* att, const float* qkv, int64_t B, int64_t T, int64_t C,
                       int64_t NH, bool causal, const AttentionBf16* bf16) {
  const int64_t hs = C / NH, R = causal ? kRowBlock : T;
  const int ti = static_cast<int>(T), hi = static_cast<int>(hs);
  const int ld3 = static_cast<int>(3 * C), ldc = static_cast<int>(C);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const bool packed = packed_products(bf16, T, hs);
#pragma omp parallel for schedule(static)
  for (int64_t bh = 0; bh < B * NH; ++bh) {
    thread_local std::vector<float> scores;  // bf16: one row block's fp32 scores (R, T)
    const int64_t b = bh / NH, h = bh % NH;
    const int64_t head = b * T * 3 * C + h * hs;
    const float* q = at(qkv, head);  // (T, hs), row stride 3C
    const Bf16* q16 = bf16 ? bf16->qkv + head : nullptr;
    const Operand k{at(q, C), at(q16, C), ld3};
    const Operand v{at(q, 2 * C), at(q16, 2 * C), ld3};
    Bf16* a16 = bf16 ? bf16->att + bh * T * T : nullptr;  // (T, T)
    if (bf16) scores.resize(static_cast<size_t>(R * T));
    float* y = at(out, b * T * C + h * hs);  // (T, hs), row stride C
    Bf16* y16 = bf16 ? at(bf16->out, b * T * C + h * hs) : nullptr;
    // Packed: k^T (hs/2 x T words) and v (T/2 x hs), once for every row block.
    thread_local std::vector<uint32_t> kt_buf, v_buf;
    uint32_t *kt = nullptr, *vp = nullptr;
    if (packed) {
      kt = words(kt_buf, hs / 2 * T);
      pp::pack_transposed(k.b16, ti, hi, ld3, kt, ti);
      if (y || y16) pp::pack_row_pairs(v.b16, ti, hi, ld3, vp = words(v_buf, T / 2 * hs), hi);
    }
    for (int64_t r0 = 0; r0 < T; r0 += R) {
      const int64_t r1 = std::min(T, r0 + R);
      const int rows = static_cast<int>(r1 - r0), keys = static_cast<int>(causal ? r1 : T);
      // scores a[r0:r1, 0:keys] = scale * q[r0:r1] k[0:keys]^T; softmax zeroes the rest of each row.
      // bf16: the probabilities stored only rounded; the product reads the stored rows.
      float* a = bf16 ? scores.data() : att + bh * T * T + r0 * T;
      if (packed) {
        pp::product(rows, keys, hi / 2, scale, pp::row_major(q16 + r0 * 3 * C, ld3), kt, ti, a, ti);
        softmax_rows_rounded_avx512(a, r0, r1, T, causal, a16 + r0 * T);
      } else {
        product(Trans::No, Trans::Yes, rows, keys, hi, scale, {at(q, r0 * 3 * C), at(q16, r0 * 3 * C), ld3}, k, a,
                ti);
        softmax_rows(a, r0, r1, T, causal, bf16 ? a16 + r0 * T : nullptr);
      }
      const Operand p = bf16 ? Operand{nullptr, a16 + r0 * T, ti} : Operand{a, nullptr, ti};
      if (packed && y16)  // c_proj's input, rounded to nearest even as it is stored
        pp::product_rounded(rows, hi, keys / 2, pp::row_major(p.b16, ti), vp, hi, y16 + r0 * C, ldc);
      else if (packed && y)
        pp::product(rows, hi, keys / 2, 1.0f, pp::row_major(p.b16, ti), vp, hi, y + r0 * C, ldc);
      else if (y16)  // rounded as oneDNN stores it: c_proj's input
        gemm_bf16_rounded(Trans::No, Trans::No, rows, hi, keys, p.b16, p.ld, v.b16, v.ld, y16 + r0 * C, ldc);
      else if (y)
        product(Trans::No, Trans::No, rows, hi, keys, 1.0f, p, v, y + r0 * C, ldc);
    }
  }
}

MESHTRAIN_HOT_LOOP
void attention_backward(float* dqkv, float* datt, const float* dout, const float* att, const float* qkv,
                        int64_t B, int64_t T, int64_t C, int64_t NH, bool causal, const AttentionBf16* bf16) {
  // With p = att and dp = datt:  ds = p * (dp - sum_j p dp) per row, with the
  // 1/sqrt(hs) score scale folded in. Query-side products (dp, dq) go by row
  // blocks [r0, r1) against keys [0, r1); key-side products (dv, dk) by key
  // blocks [j0, j1) against the queries [j0, T) that can see them.
  const int64_t hs = C / NH, R = causal ? kRowBlock : T;
  const int ti = static_cast<int>(T), hi = static_cast<int>(hs);
  const int ld3 = static_cast<int>(3 * C), ldc = static_cast<int>(C);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const bool b16 = bf16 != nullptr, packed = packed_products(bf16, T, hs);
#pragma omp parallel for schedule(static)
  for (int64_t bh = 0; bh < B * NH; ++bh) {
    thread_local std::vector<Bf16> ds16;  // bf16: this head's score gradients (T, T), rounded as computed
    // bf16: one row block's fp32 dp (R, T). Read only by the ds pass right
    // after the product that writes it, so it need not outlive the block:
    // it stays in cache instead of going out to a (B, NH, T, T) datt.
    thread_local std::vector<float> dp_block;
    const int64_t b = bh / NH, h = bh % NH;
    const int64_t head = b * T * 3 * C + h * hs, head_out = b * T * C + h * hs;
    if (b16) {
      ds16.resize(static_cast<size_t>(T * T));
      dp_block.resize(static_cast<size_t>(R * T));
    }
    const Bf16* qkv16 = b16 ? bf16->qkv + head : nullptr;
    const Bf16* dy16 = b16 ? bf16->dout + head_out : nullptr;
    // The operands at row t: q, k, v (row stride 3C) and dy (row stride C).
    auto q = [&](int64_t t) { return Operand{at(qkv, head + t * 3 * C), at(qkv16, t * 3 * C), ld3}; };
    auto k = [&](int64_t t) { return Operand{at(qkv, head + C + t * 3 * C), at(qkv16, C + t * 3 * C), ld3}; };
    auto v = [&](int64_t t) { return Operand{at(qkv, head + 2 * C + t * 3 * C), at(qkv16, 2 * C + t * 3 * C), ld3}; };
    auto dy = [&](int64_t t) { return Operand{at(dout, head_out + t * C), at(dy16, t * C), ldc}; };
    float* dq = dqkv + head;
    float* dk = dq + C;
    float* dv = dq + 2 * C;
    const float* p = b16 ? nullptr : att + bh * T * T;         // (T, T)
    const Bf16* p16 = b16 ? bf16->att + bh * T * T : nullptr;  // (T, T) under bf16
    float* dp = b16 ? nullptr : datt + bh * T * T;             // (T, T), fp32 only
    // ds[t0:, j0:] as a product's operand: the rounded copy under bf16, else dp itself (ds in place).
    auto ds = [&](int64_t t0, int64_t j0) {
      return b16 ? Operand{nullptr, ds16.data() + t0 * T + j0, ti} : Operand{dp + t0 * T + j0, nullptr, ti};
    };
    // Packed: v^T and k for the query side (hs/2 x T and T/2 x hs words);
    // dy, q, p and ds in pairs of rows for the key side (T/2 rows each).
    thread_local std::vector<uint32_t> vt_buf, k_buf, dy_buf, q_buf, p_buf, ds_buf;
    uint32_t *vt = nullptr, *kp = nullptr, *dyp = nullptr, *qp = nullptr, *pp_ = nullptr, *dsp = nullptr;
    if (packed) {
      pp::pack_transposed(v(0).b16, ti, hi, ld3, vt = words(vt_buf, hs / 2 * T), ti);
      pp::pack_row_pairs(k(0).b16, ti, hi, ld3, kp = words(k_buf, T / 2 * hs), hi);
      pp::pack_row_pairs(dy16, ti, hi, ldc, dyp = words(dy_buf, T / 2 * hs), hi);
      pp::pack_row_pairs(q(0).b16, ti, hi, ld3, qp = words(q_buf, T / 2 * hs), hi);
      // p's rows in block [r0, r1) are zero past column r1 (causal), and no
      // key block reads them there: pack up to r1 only.
      pp_ = words(p_buf, T / 2 * T);
      for (int64_t r0 = 0; r0 < T; r0 += R) {
        const int64_t r1 = std::min(T, r0 + R);
        pp::pack_row_pairs(p16 + r0 * T, static_cast<int>(r1 - r0), static_cast<int>(causal ? r1 : T), ti,
                           pp_ + r0 / 2 * T, ti);
      }
      dsp = words(ds_buf, T / 2 * T);
    }
    for (int64_t r0 = 0; r0 < T; r0 += R) {
      const int64_t r1 = std::min(T, r0 + R);
      const int rows = static_cast<int>(r1 - r0), keys = static_cast<int>(causal ? r1 : T);
      // dp[r0:r1, 0:keys] = dy[r0:r1] v[0:keys]^T, then ds (fp32: in place).
      float* dp_rows = b16 ? dp_block.data() : dp + r0 * T;  // row r0 of dp
      if (packed) {
        pp::product(rows, keys, hi / 2, 1.0f, pp::row_major(dy16 + r0 * C, ldc), vt, ti, dp_rows, ti);
        softmax_backward_rows_rounded_avx512(dp_rows, p16 + r0 * T, r0, r1, T, causal, scale, ds16.data() + r0 * T);
      } else {
        product(Trans::No, Trans::Yes, rows, keys, hi, 1.0f, dy(r0), v(0), dp_rows, ti);
        softmax_backward_rows(dp_rows, b16 ? nullptr : p + r0 * T, b16 ? p16 + r0 * T : nullptr, r0, r1, T, causal,
                              scale, b16 ? ds16.data() + r0 * T : nullptr);
      }
      // dq[r0:r1] = ds[r0:r1, 0:keys] k[0:keys]
      if (packed) {
        pp::product_streamed(rows, hi, keys / 2, pp::row_major(ds16.data() + r0 * T, ti), kp, hi, dq + r0 * 3 * C,
                             ld3);
        // The key side reads ds in pairs of rows, up to column r1 (key block
        // j0 reads rows >= j0 only).
        pp::pack_row_pairs(ds16.data() + r0 * T, rows, keys, ti, dsp + r0 / 2 * T, ti);
      } else {
        product(Trans::No, Trans::No, rows, hi, keys, 1.0f, ds(r0, 0), k(0), dq + r0 * 3 * C, ld3);
      }
    }
    for (int64_t j0 = 0; j0 < T; j0 += R) {
      const int64_t j1 = std::min(T, j0 + R), q0 = causal ? j0 : 0;
      const int keys = static_cast<int>(j1 - j0), queries = static_cast<int>(T - q0);
      // dv[j0:j1] = p[q0:T, j0:j1]^T dy[q0:T];  dk[j0:j1] = ds[q0:T, j0:j1]^T q[q0:T]
      if (packed) {  // A = p^T, ds^T: their pairs of rows read down a column
        const pp::PackedA pt{pp_ + q0 / 2 * T + j0, 1, T}, dst{dsp + q0 / 2 * T + j0, 1, T};
        pp::product_streamed(keys, hi, queries / 2, pt, dyp + q0 / 2 * hs, hi, dv + j0 * 3 * C, ld3);
        pp::product_streamed(keys, hi, queries / 2, dst, qp + q0 / 2 * hs, hi, dk + j0 * 3 * C, ld3);
        continue;
      }
      const Operand pt = b16 ? Operand{nullptr, p16 + q0 * T + j0, ti} : Operand{p + q0 * T + j0, nullptr, ti};
      product(Trans::Yes, Trans::No, keys, hi, queries, 1.0f, pt, dy(q0), dv + j0 * 3 * C, ld3);
      product(Trans::Yes, Trans::No, keys, hi, queries, 1.0f, ds(q0, j0), q(q0), dk + j0 * 3 * C, ld3);
    }
  }
}

}  // namespace meshtrain::kernels
