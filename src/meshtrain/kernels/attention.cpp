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

namespace {

// One thread's work areas for a head's backward, kept between heads.
struct BackwardScratch {
  std::vector<Bf16> ds16;  // bf16: this head's score gradients (T, T), rounded as computed
  // bf16: one row block's fp32 dp (R, T). Read only by the ds pass right
  // after the product that writes it, so it need not outlive the block:
  // it stays in cache instead of going out to a (B, NH, T, T) datt.
  std::vector<float> dp_block;
  // Packed: v^T and k for the query side (hs/2 x T and T/2 x hs words);
  // dy, q, p and ds in pairs of rows for the key side (T/2 rows each).
  std::vector<uint32_t> vt, k, dy, q, p, ds;
  // Where HeadBackward::pack_operands put this head's packed operands.
  uint32_t *vt_words = nullptr, *k_words = nullptr, *dy_words = nullptr, *q_words = nullptr, *p_words = nullptr,
           *ds_words = nullptr;
};

// One head's backward. With p = att and dp = datt:  ds = p * (dp - sum_j p
// dp) per row, with the 1/sqrt(hs) score scale folded in. Query-side
// products (dp, dq) go by row blocks [r0, r1) against keys [0, r1); key-side
// products (dv, dk) by key blocks [j0, j1) against the queries [j0, T) that
// can see them.
struct HeadBackward {
  int64_t T, C, hs, R;
  bool causal, b16, packed;
  int ti, hi, ld3, ldc;
  float scale;
  const float *qkv, *dout;  // this head's first q column, dy column (fp32; null under bf16)
  const Bf16 *qkv16, *dy16;  // the same under bf16
  float *dq, *dk, *dv;
  const float* p;  // (T, T), fp32 only
  const Bf16* p16;  // (T, T) under bf16
  float* dp;        // (T, T), fp32 only
  BackwardScratch& w;

  // The operands at row t: q, k, v (row stride 3C) and dy (row stride C).
  Operand q(int64_t t) const { return {at(qkv, t * 3 * C), at(qkv16, t * 3 * C), ld3}; }
  Operand k(int64_t t) const { return {at(qkv, C + t * 3 * C), at(qkv16, C + t * 3 * C), ld3}; }
  Operand v(int64_t t) const { return {at(qkv, 2 * C + t * 3 * C), at(qkv16, 2 * C + t * 3 * C), ld3}; }
  Operand dy(int64_t t) const { return {at(dout, t * C), at(dy16, t * C), ldc}; }
  // ds[t0:, j0:] as a product's operand: the rounded copy under bf16, else dp itself (ds in place).
  Operand ds(int64_t t0, int64_t j0) const {
    return b16 ? Operand{nullptr, w.ds16.data() + t0 * T + j0, ti} : Operand{dp + t0 * T + j0, nullptr, ti};
  }

  void pack_operands() {
    pp::pack_transposed(v(0).b16, ti, hi, ld3, w.vt_words = words(w.vt, hs / 2 * T), ti);
    pp::pack_row_pairs(k(0).b16, ti, hi, ld3, w.k_words = words(w.k, T / 2 * hs), hi);
    pp::pack_row_pairs(dy16, ti, hi, ldc, w.dy_words = words(w.dy, T / 2 * hs), hi);
    pp::pack_row_pairs(q(0).b16, ti, hi, ld3, w.q_words = words(w.q, T / 2 * hs), hi);
    // p's rows in block [r0, r1) are zero past column r1 (causal), and no
    // key block reads them there: pack up to r1 only.
    w.p_words = words(w.p, T / 2 * T);
    for (int64_t r0 = 0; r0 < T; r0 += R) {
      const int64_t r1 = std::min(T, r0 + R);
      pp::pack_row_pairs(p16 + r0 * T, static_cast<int>(r1 - r0), static_cast<int>(causal ? r1 : T), ti,
                         w.p_words + r0 / 2 * T, ti);
    }
    w.ds_words = words(w.ds, T / 2 * T);
  }

  // Rows [r0, r1): dp = dy v^T, then ds (fp32: in place), then dq = ds k.
  void query_block(int64_t r0, int64_t r1) {
    const int rows = static_cast<int>(r1 - r0), keys = static_cast<int>(causal ? r1 : T);
    float* dp_rows = b16 ? w.dp_block.data() : dp + r0 * T;  // row r0 of dp
    Bf16* ds_rows = b16 ? w.ds16.data() + r0 * T : nullptr;
    if (packed) {
      pp::product(rows, keys, hi / 2, 1.0f, pp::row_major(dy16 + r0 * C, ldc), w.vt_words, ti, dp_rows, ti);
      softmax_backward_rows_rounded_avx512(dp_rows, p16 + r0 * T, r0, r1, T, causal, scale, ds_rows);
      pp::product_streamed(rows, hi, keys / 2, pp::row_major(ds_rows, ti), w.k_words, hi, dq + r0 * 3 * C, ld3);
      // The key side reads ds in pairs of rows, up to column r1 (key block
      // j0 reads rows >= j0 only).
      pp::pack_row_pairs(ds_rows, rows, keys, ti, w.ds_words + r0 / 2 * T, ti);
      return;
    }
    product(Trans::No, Trans::Yes, rows, keys, hi, 1.0f, dy(r0), v(0), dp_rows, ti);
    softmax_backward_rows(dp_rows, b16 ? nullptr : p + r0 * T, b16 ? p16 + r0 * T : nullptr, r0, r1, T, causal, scale,
                          ds_rows);
    product(Trans::No, Trans::No, rows, hi, keys, 1.0f, ds(r0, 0), k(0), dq + r0 * 3 * C, ld3);
  }

  // Keys [j0, j1): dv = p[q0:T, j0:j1]^T dy[q0:T];  dk = ds[q0:T, j0:j1]^T q[q0:T].
  void key_block(int64_t j0, int64_t j1) {
    const int64_t q0 = causal ? j0 : 0;
    const int keys = static_cast<int>(j1 - j0), queries = static_cast<int>(T - q0);
    if (packed) {  // A = p^T, ds^T: their pairs of rows read down a column
      const pp::PackedA pt{w.p_words + q0 / 2 * T + j0, 1, T}, dst{w.ds_words + q0 / 2 * T + j0, 1, T};
      pp::product_streamed(keys, hi, queries / 2, pt, w.dy_words + q0 / 2 * hs, hi, dv + j0 * 3 * C, ld3);
      pp::product_streamed(keys, hi, queries / 2, dst, w.q_words + q0 / 2 * hs, hi, dk + j0 * 3 * C, ld3);
      return;
    }
    const Operand pt = b16 ? Operand{nullptr, p16 + q0 * T + j0, ti} : Operand{p + q0 * T + j0, nullptr, ti};
    product(Trans::Yes, Trans::No, keys, hi, queries, 1.0f, pt, dy(q0), dv + j0 * 3 * C, ld3);
    product(Trans::Yes, Trans::No, keys, hi, queries, 1.0f, ds(q0, j0), q(q0), dk + j0 * 3 * C, ld3);
  }

  void run() {
    if (b16) {
      w.ds16.resize(static_cast<size_t>(T * T));
      w.dp_block.resize(static_cast<size_t>(R * T));
    }
    if (packed) pack_operands();
    for (int64_t r0 = 0; r0 < T; r0 += R) query_block(r0, std::min(T, r0 + R));
    for (int64_t j0 = 0; j0 < T; j0 += R) key_block(j0, std::min(T, j0 + R));
  }
};

}  // namespace

MESHTRAIN_HOT_LOOP
void attention_backward(float* dqkv, float* datt, const float* dout, const float* att, const float* qkv,
                        int64_t B, int64_t T, int64_t C, int64_t NH, bool causal, const AttentionBf16* bf16) {
  const int64_t hs = C / NH;
  const bool b16 = bf16 != nullptr;
#pragma omp parallel for schedule(static)
  for (int64_t bh = 0; bh < B * NH; ++bh) {
    thread_local BackwardScratch scratch;
    const int64_t b = bh / NH, h = bh % NH;
    const int64_t head = b * T * 3 * C + h * hs, head_out = b * T * C + h * hs;
    HeadBackward{.T = T, .C = C, .hs = hs, .R = causal ? kRowBlock : T,
                 .causal = causal, .b16 = b16, .packed = packed_products(bf16, T, hs),
                 .ti = static_cast<int>(T), .hi = static_cast<int>(hs),
                 .ld3 = static_cast<int>(3 * C), .ldc = static_cast<int>(C),
                 .scale = 1.0f / std::sqrt(static_cast<float>(hs)),
                 .qkv = qkv ? qkv + head : nullptr, .dout = dout ? dout + head_out : nullptr,
                 .qkv16 = b16 ? bf16->qkv + head : nullptr, .dy16 = b16 ? bf16->dout + head_out : nullptr,
                 .dq = dqkv + head, .dk = dqkv + head + C, .dv = dqkv + head + 2 * C,
                 .p = b16 ? nullptr : att + bh * T * T, .p16 = b16 ? bf16->att + bh * T * T : nullptr,
                 .dp = b16 ? nullptr : datt + bh * T * T, .w = scratch}
        .run();
  }
}

}  // namespace meshtrain::kernels
