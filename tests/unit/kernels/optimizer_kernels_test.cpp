// SGD's, LARS's and LAMB's kernels (kernels/momentum.hpp, kernels/lamb.hpp)
// against the formulas written out here: every element's bits, and each
// chunk's sums of squares in norm.hpp's lane association (element i into
// lane i % 8, the lanes added in order), which a GPU's threads reproduce.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "kernel_test_util.hpp"
#include "meshtrain/kernels/lamb.hpp"
#include "meshtrain/kernels/momentum.hpp"

namespace meshtrain::kernels {
namespace {

using testing::random_vector;

// Two chunks of one decaying view (sizes not multiples of 8) and one of a
// view without decay; elements laid out back to back.
const int64_t kSizes[] = {4096, 13, 29};
const int32_t kViews[] = {0, 0, 1};
const int32_t kDecays[] = {1, 1, 0};
constexpr size_t kElems = 4096 + 13 + 29;

double lane_sum_squares(const float* x, int64_t n) {
  double lane[8] = {};
  for (int64_t i = 0; i < n; ++i) lane[i % 8] += double(x[i]) * double(x[i]);
  double s = 0;
  for (double l : lane) s += l;
  return s;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

struct MomentumCase {
  std::vector<float> w, g, buf;
  std::vector<MomentumChunk> chunks(bool with_buffer) {
    std::vector<MomentumChunk> out;
    int64_t at = 0;
    for (size_t c = 0; c < 3; ++c) {
      out.push_back({w.data() + at, g.data() + at, with_buffer ? buf.data() + at : nullptr, kSizes[c], kDecays[c],
                     kViews[c]});
      at += kSizes[c];
    }
    return out;
  }
};

TEST(MomentumKernels, UpdateIsTheFormulaForEveryElement) {
  for (const bool with_buffer : {false, true})
    for (const bool nesterov : {false, true})
      for (const bool trusted : {false, true}) {
        if (nesterov && !with_buffer) continue;
        SCOPED_TRACE(std::string(with_buffer ? "momentum" : "plain") + (nesterov ? ", nesterov" : "") +
                     (trusted ? ", trust ratios" : ", trust 1"));
        Rng rng(11);
        MomentumCase x{random_vector(kElems, rng), random_vector(kElems, rng), random_vector(kElems, rng)};
        const MomentumStep step{.lr = 0.05f, .momentum = with_buffer ? 0.9f : 0.0f, .weight_decay = 0.01f,
                                .nesterov = nesterov};
        const std::vector<float> trusts{0.37f, 1.0f};
        std::vector<float> want_w = x.w, want_buf = x.buf;
        size_t i = 0;
        for (size_t c = 0; c < 3; ++c)
          for (int64_t k = 0; k < kSizes[c]; ++k, ++i) {
            const float wd = kDecays[c] ? 0.01f : 0.0f, trust = trusted ? trusts[size_t(kViews[c])] : 1.0f;
            float d = trust * (x.g[i] + wd * want_w[i]);
            if (with_buffer) {
              want_buf[i] = 0.9f * want_buf[i] + d;
              d = nesterov ? d + 0.9f * want_buf[i] : want_buf[i];
            }
            want_w[i] -= 0.05f * d;
          }
        const std::vector<MomentumChunk> chunks = x.chunks(with_buffer);
        momentum_update(chunks, trusted ? trusts.data() : nullptr, step);
        EXPECT_TRUE(same_bits(x.w, want_w));
        EXPECT_TRUE(same_bits(x.buf, want_buf));  // untouched without a buffer
      }
}

TEST(MomentumKernels, SquaresAreEachDecayingChunksInLaneOrder) {
  Rng rng(12);
  MomentumCase x{random_vector(kElems, rng), random_vector(kElems, rng), {}};
  const std::vector<MomentumChunk> chunks = x.chunks(false);
  std::vector<double> sums(6, -1.0);
  momentum_squares(chunks, sums.data());
  int64_t at = 0;
  for (size_t c = 0; c < 3; ++c) {
    const double want_w = kDecays[c] ? lane_sum_squares(x.w.data() + at, kSizes[c]) : 0.0;
    const double want_g = kDecays[c] ? lane_sum_squares(x.g.data() + at, kSizes[c]) : 0.0;
    EXPECT_EQ(sums[2 * c], want_w) << "chunk " << c;
    EXPECT_EQ(sums[2 * c + 1], want_g) << "chunk " << c;
    at += kSizes[c];
  }
  EXPECT_GT(sums[0], 0.0);
}

TEST(LambKernels, MomentsSumsAndApplyAreTheFormulas) {
  Rng rng(13);
  std::vector<float> w = random_vector(kElems, rng), g = random_vector(kElems, rng);
  std::vector<float> m = random_vector(kElems, rng, 0.1f), v = random_vector(kElems, rng, 0.1f);
  for (float& x : v) x = x * x;  // a second moment is not negative
  const LambStep step{.b1 = 0.9f, .one_minus_b1 = 0.1f, .b2 = 0.999f, .one_minus_b2 = 0.001f, .bc1 = 0.271f,
                      .bc2_sqrt = 0.0547f, .eps = 1e-6f, .weight_decay = 0.02f};
  std::vector<LambChunk> chunks;
  int64_t at = 0;
  for (size_t c = 0; c < 3; ++c) {
    chunks.push_back({w.data() + at, g.data() + at, m.data() + at, v.data() + at, kSizes[c], kDecays[c], kViews[c]});
    at += kSizes[c];
  }
  // The formulas, element by element.
  std::vector<float> want_m = m, want_v = v, want_w = w, u(kElems);
  std::vector<double> want_sums;
  size_t i = 0;
  for (size_t c = 0; c < 3; ++c) {
    const size_t first = i;
    for (int64_t k = 0; k < kSizes[c]; ++k, ++i) {
      want_m[i] = 0.9f * want_m[i] + 0.1f * g[i];
      want_v[i] = 0.999f * want_v[i] + 0.001f * g[i] * g[i];
      u[i] = (want_m[i] / 0.271f) / (std::sqrt(want_v[i]) / 0.0547f + 1e-6f) + (kDecays[c] ? 0.02f : 0.0f) * w[i];
    }
    want_sums.push_back(lane_sum_squares(w.data() + first, kSizes[c]));
    want_sums.push_back(lane_sum_squares(u.data() + first, kSizes[c]));
  }
  std::vector<double> sums(6, -1.0);
  lamb_moments(chunks, step, sums.data());
  EXPECT_TRUE(same_bits(m, want_m));
  EXPECT_TRUE(same_bits(v, want_v));
  EXPECT_TRUE(same_bits(w, want_w));  // pass 1 leaves the parameters
  EXPECT_EQ(sums, want_sums);

  const std::vector<float> scales{0.013f, 0.001f};
  for (size_t c = 0, j = 0; c < 3; ++c)
    for (int64_t k = 0; k < kSizes[c]; ++k, ++j) want_w[j] -= scales[size_t(kViews[c])] * u[j];
  lamb_apply(chunks, scales.data(), step);
  EXPECT_TRUE(same_bits(w, want_w));
}

}  // namespace
}  // namespace meshtrain::kernels
