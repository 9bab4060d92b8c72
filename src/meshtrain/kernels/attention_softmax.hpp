#pragma once
// The row passes of attention's softmax, forward and backward, between its
// products (attention.cpp): one row block [r0, r1) of one head at a time,
// rows of T, each pointer at row r0. Row t covers columns [0, t] when
// causal (the rest are exact zeros in what is written), else [0, T).
//
// Two versions: portable loops GCC vectorizes (compiled per instruction
// set, cpu_dispatch.hpp), and AVX-512 intrinsics for the packed bf16 path,
// which runs only where the CPU has AVX512-BF16 (bf16_pair_products.hpp).
// The portable exp builds 2^n from bits behind two clamps, its sums end in
// a sequential lane sum per row and its last partial vector runs scalar;
// the AVX-512 one takes 2^n from vscalefps (which underflows cleanly to 0,
// no clamp), masks the partial vector and sums each row as a tree: in the
// data-parallel job the softmax's share of the CPU time fell from 1.37% to
// 0.63% (bench/RESULTS.md). Both use the same exp polynomial
// (Cephes expf, relative error < 2e-7), so their probabilities agree to
// float rounding, not bit for bit.
#include <cstdint>

#include "meshtrain/kernels/bf16.hpp"

namespace meshtrain::kernels {

// Softmax of the scores s in place; with p16, the probabilities are written
// only there, rounded, and s keeps the unnormalized exponentials: one pass
// fewer than rounding after.
void softmax_rows(float* s, int64_t r0, int64_t r1, int64_t T, bool causal, Bf16* p16 = nullptr);

// Its backward, dp the probabilities' gradient: ds = p (dp - sum_j p dp)
// scale. fp32 (p given): ds in place of dp, zeros past each row's end. bf16
// (p16 and ds16 given): ds rounded as it is computed into ds16 (the fp32 ds
// is read by nothing else), with zeros up to column r1, the keys the row
// block's products read.
void softmax_backward_rows(float* dp, const float* p, const Bf16* p16, int64_t r0, int64_t r1, int64_t T,
                           bool causal, float scale, Bf16* ds16);

// The bf16 forms of both in AVX-512 (only where pair_products::available());
// T a multiple of 16.
void softmax_rows_rounded_avx512(float* s, int64_t r0, int64_t r1, int64_t T, bool causal, Bf16* p16);
void softmax_backward_rows_rounded_avx512(const float* dp, const Bf16* p16, int64_t r0, int64_t r1, int64_t T,
                                          bool causal, float scale, Bf16* ds16);

}  // namespace meshtrain::kernels
