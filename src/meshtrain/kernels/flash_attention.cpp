#include "meshtrain/kernels/flash_attention.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "meshtrain/core/cpu_dispatch.hpp"
#include "meshtrain/kernels/attention_products.hpp"
#include "meshtrain/kernels/flash_attention_packed.hpp"
#include "meshtrain/kernels/flash_attention_rows.hpp"

namespace meshtrain::kernels {

namespace {

using attention_detail::at;
using attention_detail::Operand;
using attention_detail::product;

using namespace flash_detail;

// One head's q, k, v and output operands at row t.
struct HeadOperands {
  const float* qkv;  // at the head's q column of row 0 (fp32), or null
  const Bf16* qkv16;  // the same in bf16, or null
  int64_t C;
  Operand q(int64_t t) const { return {at(qkv, t * 3 * C), at(qkv16, t * 3 * C), int(3 * C)}; }
  Operand k(int64_t t) const { return {at(qkv, C + t * 3 * C), at(qkv16, C + t * 3 * C), int(3 * C)}; }
  Operand v(int64_t t) const { return {at(qkv, 2 * C + t * 3 * C), at(qkv16, 2 * C + t * 3 * C), int(3 * C)}; }
};

}  // namespace

MESHTRAIN_HOT_LOOP
void flash_attention_forward(float* out, float* lse, const float* qkv, int64_t B, int64_t T, int64_t C, int64_t NH,
                             bool causal, const AttentionBf16* bf16) {
  if (flash_packed_products(bf16, T, C / NH)) {
    flash_forward_packed(lse, *bf16, B, T, C, NH, causal);
    return;
  }
  const int64_t hs = C / NH, row_blocks = (T + kForwardRows - 1) / kForwardRows;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  // Causal row blocks grow in cost down the sequence: handed out as threads free up.
#pragma omp parallel for schedule(dynamic)
  for (int64_t task = 0; task < B * NH * row_blocks; ++task) {
    const int64_t bh = task / row_blocks, b = bh / NH, h = bh % NH;
    const int64_t r0 = (task % row_blocks) * kForwardRows, rows = std::min(kForwardRows, T - r0);
    const HeadOperands head{at(qkv, b * T * 3 * C + h * hs), bf16 ? bf16->qkv + b * T * 3 * C + h * hs : nullptr, C};
    thread_local std::vector<float> s, acc, m, l;
    thread_local std::vector<Bf16> p16;
    s.resize(size_t(kForwardRows * kForwardKeys));
    acc.assign(size_t(rows * hs), 0.0f);
    m.assign(size_t(rows), -INFINITY);
    l.assign(size_t(rows), 0.0f);
    if (bf16) p16.resize(s.size());
    const int64_t keys_end = causal ? r0 + rows : T;
    for (int64_t j0 = 0; j0 < keys_end; j0 += kForwardKeys) {
      const int64_t nk = std::min(kForwardKeys, keys_end - j0);
      product(Trans::No, Trans::Yes, int(rows), int(nk), int(hs), scale, head.q(r0), head.k(j0), s.data(),
              int(kForwardKeys));
      online_softmax_block(s.data(), kForwardKeys, rows, nk, r0, j0, causal, m.data(), l.data(), acc.data(), hs,
                           bf16 ? p16.data() : nullptr);
      const Operand p = bf16 ? Operand{nullptr, p16.data(), int(kForwardKeys)}
                             : Operand{s.data(), nullptr, int(kForwardKeys)};
      product(Trans::No, Trans::No, int(rows), int(hs), int(nk), 1.0f, p, head.v(j0), acc.data(), int(hs), 1.0f);
    }
    finish_rows(acc.data(), m.data(), l.data(), rows, r0, hs, C, at(out, b * T * C + h * hs),
                bf16 && bf16->out ? bf16->out + b * T * C + h * hs : nullptr, lse + bh * T);
  }
}

MESHTRAIN_HOT_LOOP
void flash_attention_backward(float* dqkv, const float* dout, const float* out, const float* lse, const float* qkv,
                              int64_t B, int64_t T, int64_t C, int64_t NH, bool causal, const AttentionBf16* bf16) {
  if (flash_packed_products(bf16, T, C / NH)) {
    flash_backward_packed(dqkv, lse, *bf16, B, T, C, NH, causal);
    return;
  }
  const int64_t hs = C / NH, n = kBackwardBlock;
  const int ld3 = int(3 * C), ldc = int(C);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
#pragma omp parallel for schedule(static)
  for (int64_t bh = 0; bh < B * NH; ++bh) {
    const int64_t b = bh / NH, h = bh % NH;
    const int64_t head_off = b * T * 3 * C + h * hs, out_off = b * T * C + h * hs;
    const HeadOperands head{at(qkv, head_off), bf16 ? bf16->qkv + head_off : nullptr, C};
    const Bf16* dy16 = bf16 ? bf16->dout + out_off : nullptr;
    auto dy = [&](int64_t t) { return Operand{at(dout, out_off + t * C), at(dy16, t * C), ldc}; };
    float* dq = dqkv + head_off;
    float* dk = dq + C;
    float* dv = dq + 2 * C;
    thread_local std::vector<float> D, s, dp;
    thread_local std::vector<Bf16> p16, ds16;
    D.resize(size_t(T));
    s.resize(size_t(n * n));
    dp.resize(size_t(n * n));
    if (bf16) {
      p16.resize(s.size());
      ds16.resize(s.size());
    }
    output_dots(D.data(), at(dout, out_off), at(out, out_off), dy16, bf16 ? bf16->out + out_off : nullptr, T, C, hs);
    const float* lse_head = lse + bh * T;
    const Operand p = bf16 ? Operand{nullptr, p16.data(), int(n)} : Operand{s.data(), nullptr, int(n)};
    const Operand ds = bf16 ? Operand{nullptr, ds16.data(), int(n)} : Operand{dp.data(), nullptr, int(n)};
    for (int64_t j0 = 0; j0 < T; j0 += n) {
      const int64_t nk = std::min(n, T - j0);
      for (int64_t r0 = causal ? j0 : 0; r0 < T; r0 += n) {
        const int64_t rows = std::min(n, T - r0);
        const float first_for_keys = r0 == (causal ? j0 : 0) ? 0.0f : 1.0f;  // beta: dk, dv start here
        const float first_for_rows = j0 == 0 ? 0.0f : 1.0f;                  // beta: dq starts here
        product(Trans::No, Trans::Yes, int(rows), int(nk), int(hs), scale, head.q(r0), head.k(j0), s.data(), int(n));
        probabilities_block(s.data(), n, rows, nk, r0, j0, causal, lse_head, bf16 ? p16.data() : nullptr);
        // dv[j0:] += p^T dy[r0:];  dp = dy[r0:] v[j0:]^T
        product(Trans::Yes, Trans::No, int(nk), int(hs), int(rows), 1.0f, p, dy(r0), dv + j0 * 3 * C, ld3,
                first_for_keys);
        product(Trans::No, Trans::Yes, int(rows), int(nk), int(hs), 1.0f, dy(r0), head.v(j0), dp.data(), int(n));
        score_gradients_block(dp.data(), s.data(), n, rows, nk, r0, D.data(), scale, bf16 ? ds16.data() : nullptr);
        // dq[r0:] += ds k[j0:];  dk[j0:] += ds^T q[r0:]
        product(Trans::No, Trans::No, int(rows), int(hs), int(nk), 1.0f, ds, head.k(j0), dq + r0 * 3 * C, ld3,
                first_for_rows);
        product(Trans::Yes, Trans::No, int(nk), int(hs), int(rows), 1.0f, ds, head.q(r0), dk + j0 * 3 * C, ld3,
                first_for_keys);
      }
    }
  }
}

}  // namespace meshtrain::kernels
