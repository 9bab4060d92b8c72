#pragma once
// Comparisons of a CUDA kernel's output with the CPU kernel's, shared by the
// memory-bound kernels' tests (encoder, layernorm, gelu, adamw, global norm,
// bf16 conversion, classifier). Each reports its first few mismatches only,
// and expect_close prints its worst error, so a GPU run shows the margin.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <type_traits>
#include <vector>

#include "meshtrain/core/bf16.hpp"

namespace meshtrain::test {

inline uint32_t bits_of(float x) { return std::bit_cast<uint32_t>(x); }
inline uint16_t bits_of(Bf16 x) { return x.bits; }
inline uint32_t bits_of(int32_t x) { return static_cast<uint32_t>(x); }
inline bool is_nan(float x) { return std::isnan(x); }
inline bool is_nan(Bf16 x) { return (x.bits & 0x7fffu) > 0x7f80u; }

// got and want hold the same bits, element by element. nan_any: a NaN
// matches any NaN (the payload of a NaN that arithmetic makes differs
// between x86, which keeps its operand's or makes 0xffc00000, and a GPU,
// which makes 0x7fffffff).
template <class T>
void expect_same_bits(const std::vector<T>& got, const std::vector<T>& want, const char* what, bool nan_any = false) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (bits_of(got[i]) == bits_of(want[i])) continue;
    if constexpr (!std::is_integral_v<T>) {
      if (nan_any && is_nan(got[i]) && is_nan(want[i])) continue;
    }
    if (++bad <= 5)
      ADD_FAILURE() << what << "[" << i << "]: bits 0x" << std::hex << bits_of(got[i]) << ", CPU 0x"
                    << bits_of(want[i]) << std::dec;
  }
  EXPECT_EQ(bad, 0u) << what << ": elements whose bits differ, of " << got.size();
}

// |got - want| <= rel * (|want| + scale) for every element, with scale the
// mean |want| over the array: an element that cancels to near zero (a
// layernorm gradient, a column sum) carries rounding of its terms' size,
// not of its own, and summation orders differ between a GPU and the CPU.
// NaN (a poisoned element never written) always fails.
inline void expect_close(const std::vector<float>& got, const std::vector<float>& want, double rel,
                         const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double scale = 0;
  for (float w : want) scale += std::fabs(double(w));
  scale = want.empty() ? 0 : scale / double(want.size());
  size_t bad = 0;
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(double(got[i]) - double(want[i]));
    const double tol = rel * (std::fabs(double(want[i])) + scale);
    if (tol > 0) worst = std::max(worst, err / tol * rel);
    if (err <= tol) continue;  // false for NaN
    if (++bad <= 5) ADD_FAILURE() << what << "[" << i << "]: " << got[i] << ", CPU " << want[i];
  }
  std::printf("  %s: worst error %.3g relative to (|CPU| + mean |CPU|), limit %.3g\n", what, worst, rel);
  EXPECT_EQ(bad, 0u) << what << ": elements off by more than " << rel << " relative, of " << got.size();
}

}  // namespace meshtrain::test
