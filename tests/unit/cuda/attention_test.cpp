// Flash attention on the GPU (kernels/cuda/attention.hpp) against the CPU
// kernel (kernels/attention.hpp) on the same random values: out and dqkv
// against the CPU's, lse against log(sum(exp(scores))) in double, causal and
// not, sequence lengths that are not a multiple of the tile, head sizes from
// both of the kernels' register buckets; and the same bits when run twice.
//
// Errors are normwise: max |got - want| / max |want| over a tensor (for
// dqkv, over each of its q, k and v parts, whose sizes differ; see
// kZeroFloor for tensors that are zero). fp32 allows
// 1e-5 for out (the GPU's expf and summation order against the CPU's
// fast_exp and gemm), 1e-4 for dqkv. bf16 inputs are rounded on the host, so
// the fp32 CPU kernel on the rounded values is the reference; 1e-2 allows
// for a bf16 output's rounding (and, in backward, the delta computed from
// it). Each check prints its worst error, so a GPU run shows the margin.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "gpu_test_util.hpp"
#include "meshtrain/core/bf16.hpp"
#include "meshtrain/core/error.hpp"
#include "meshtrain/kernels/attention.hpp"
#include "meshtrain/kernels/cuda/attention.hpp"

namespace meshtrain::kernels::cuda {
namespace {

using test::random_floats;

struct Shape {
  int64_t B, T, NH, hs;
  bool causal;
  int64_t C() const { return NH * hs; }
  size_t qkv_size() const { return size_t(B * T * 3 * C()); }
  size_t out_size() const { return size_t(B * T * C()); }
  size_t lse_size() const { return size_t(B * NH * T); }
  std::string name() const {
    return "B=" + std::to_string(B) + " T=" + std::to_string(T) + " NH=" + std::to_string(NH) +
           " hs=" + std::to_string(hs) + (causal ? " causal" : " full");
  }
};

// The two the brief names (GPT-2's head size 64), then: not causal, T = 1,
// head size 128 and 40 (the other register bucket, and a size that is not a
// power of two), T = 1000.
const Shape kShapes[] = {{2, 37, 3, 64, true},  {1, 130, 2, 64, true}, {1, 37, 2, 64, false}, {2, 1, 2, 64, true},
                         {1, 70, 2, 128, true}, {2, 45, 3, 40, true},  {1, 33, 1, 8, false},  {1, 1000, 1, 64, true}};

std::vector<float> rounded_to_bf16(std::vector<float> v) {
  for (float& x : v) x = to_float(to_bf16(x));
  return v;
}
std::vector<Bf16> to_bf16_vector(const std::vector<float>& v) {
  std::vector<Bf16> h(v.size());
  for (size_t i = 0; i < v.size(); ++i) h[i] = to_bf16(v[i]);
  return h;
}
std::vector<float> widened(const std::vector<Bf16>& v) {
  std::vector<float> f(v.size());
  for (size_t i = 0; i < v.size(); ++i) f[i] = to_float(v[i]);
  return f;
}

// The CPU kernel's out (B, T, C) and dqkv (B, T, 3C).
struct CpuResult {
  std::vector<float> out, dqkv;
};
CpuResult cpu_attention(const std::vector<float>& qkv, const std::vector<float>& dout, const Shape& s) {
  const size_t tt = size_t(s.B * s.NH * s.T * s.T);
  std::vector<float> att(tt), datt(tt);
  CpuResult r{std::vector<float>(s.out_size()), std::vector<float>(s.qkv_size())};
  ::meshtrain::kernels::attention_forward(r.out.data(), att.data(), qkv.data(), s.B, s.T, s.C(), s.NH, s.causal);
  ::meshtrain::kernels::attention_backward(r.dqkv.data(), datt.data(), dout.data(), att.data(), qkv.data(), s.B,
                                           s.T, s.C(), s.NH, s.causal);
  return r;
}

// lse (B, NH, T) in double: log(sum_j exp(q_t . k_j / sqrt(hs))) over the keys row t sees.
std::vector<double> lse_reference(const std::vector<float>& qkv, const Shape& s) {
  const int64_t C = s.C();
  const double scale = 1.0 / std::sqrt(double(s.hs));
  std::vector<double> lse(s.lse_size()), scores(size_t(s.T));
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.NH; ++h)
      for (int64_t t = 0; t < s.T; ++t) {
        const float* q = qkv.data() + (b * s.T + t) * 3 * C + h * s.hs;
        const int64_t n = s.causal ? t + 1 : s.T;
        double mx = -INFINITY;
        for (int64_t j = 0; j < n; ++j) {
          const float* k = qkv.data() + (b * s.T + j) * 3 * C + C + h * s.hs;
          double dot = 0;
          for (int64_t x = 0; x < s.hs; ++x) dot += double(q[x]) * double(k[x]);
          scores[size_t(j)] = dot * scale;
          mx = std::max(mx, scores[size_t(j)]);
        }
        double sum = 0;
        for (int64_t j = 0; j < n; ++j) sum += std::exp(scores[size_t(j)] - mx);
        lse[size_t((b * s.NH + h) * s.T + t)] = mx + std::log(sum);
      }
  return lse;
}

// Columns [part * C, (part + 1) * C) of each (B * T, 3C) row: q, k or v.
std::vector<float> qkv_part(const std::vector<float>& qkv, const Shape& s, int part) {
  const int64_t C = s.C();
  std::vector<float> p(s.out_size());
  for (int64_t row = 0; row < s.B * s.T; ++row)
    std::copy_n(qkv.begin() + row * 3 * C + part * C, C, p.begin() + row * C);
  return p;
}

// Below this max |want| a tensor counts as zero: at T = 1, dq and dk are 0
// in exact arithmetic (p = 1, so dp - delta = 0) and rounding noise (~2e-7)
// on the GPU. Every other tensor here has max |want| above 0.05.
constexpr double kZeroFloor = 1e-2;

// max |got - want| / max(max |want|, kZeroFloor) within rel (a NaN anywhere
// fails); prints the ratio.
void expect_close(const std::vector<float>& got, const std::vector<float>& want, double rel, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double max_want = 0, max_err = 0;
  size_t worst = 0, nonfinite = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    max_want = std::max(max_want, std::fabs(double(want[i])));
    if (!std::isfinite(got[i])) {
      ++nonfinite;
      continue;
    }
    const double err = std::fabs(double(got[i]) - double(want[i]));
    if (err > max_err) max_err = err, worst = i;
  }
  const double ratio = max_err / std::max(max_want, kZeroFloor);
  std::printf("[ attention ] %-52s worst |err| / max|want| %.3g (allowed %.0e)\n", what.c_str(), ratio, rel);
  EXPECT_EQ(nonfinite, 0u) << what << ": elements not written or not finite";
  EXPECT_LE(ratio, rel) << what << ": worst at " << worst << ": got " << got[worst] << ", want " << want[worst];
}

void expect_lse_close(const std::vector<float>& got, const std::vector<double>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t bad = 0, first_bad = 0;
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(double(got[i]) - want[i]) / std::max(1.0, std::fabs(want[i]));
    if (!(err <= 1e-5) && bad++ == 0) first_bad = i;
    worst = std::isnan(err) ? INFINITY : std::max(worst, err);
  }
  std::printf("[ attention ] %-52s worst lse |err| / max(1, |lse|) %.3g (allowed 1e-05)\n", what.c_str(), worst);
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " lse values off; first at " << first_bad << ": got " << got[first_bad]
                     << ", want " << want[first_bad];
}

void expect_dqkv_close(const std::vector<float>& got, const std::vector<float>& want, const Shape& s, double rel,
                       const std::string& what) {
  const char* names[] = {"dq", "dk", "dv"};
  for (int part = 0; part < 3; ++part)
    expect_close(qkv_part(got, s, part), qkv_part(want, s, part), rel, what + " " + names[part]);
}

template <class T>
std::vector<unsigned char> bytes_of(const std::vector<T>& v) {
  std::vector<unsigned char> b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// One forward and backward on the GPU; In float or Bf16 (qkv, dout), Out
// float or Bf16 (out). Outputs and scratch start poisoned (NaN).
template <class Out>
struct GpuRun {
  std::vector<Out> out;
  std::vector<float> lse, dqkv;
};

template <class In, class Out>
GpuRun<Out> gpu_attention(CudaAllocator& alloc, const std::vector<In>& qkv, const std::vector<In>& dout,
                              const Shape& s) {
  const DeviceBuffer<In> d_qkv = test::to_device(alloc, qkv);
  const DeviceBuffer<In> d_dout = test::to_device(alloc, dout);
  DeviceBuffer<Out> d_out = test::poisoned<Out>(alloc, s.out_size());
  DeviceBuffer<float> d_lse = test::poisoned<float>(alloc, s.lse_size());
  DeviceBuffer<float> d_delta =
      test::poisoned<float>(alloc, size_t(attention_backward_scratch_floats(s.B, s.T, s.NH)));
  DeviceBuffer<float> d_dqkv = test::poisoned<float>(alloc, s.qkv_size());
  attention_forward(d_out.ptr().raw(), d_lse.ptr().raw(), d_qkv.ptr().raw(), s.B, s.T, s.C(), s.NH, s.causal,
                    alloc.stream());
  attention_backward(d_dqkv.ptr().raw(), d_delta.ptr().raw(), d_dout.ptr().raw(), d_out.ptr().raw(),
                     d_lse.ptr().raw(), d_qkv.ptr().raw(), s.B, s.T, s.C(), s.NH, s.causal, alloc.stream());
  return {test::to_host(d_out), test::to_host(d_lse), test::to_host(d_dqkv)};
}

TEST(CudaAttention, Fp32MatchesCpuKernel) {
  MESHTRAIN_REQUIRE_GPU();
  CudaAllocator alloc;
  uint64_t seed = 1;
  for (const Shape& s : kShapes) {
    const std::vector<float> qkv = random_floats(s.qkv_size(), seed++);
    const std::vector<float> dout = random_floats(s.out_size(), seed++);
    const CpuResult cpu = cpu_attention(qkv, dout, s);
    const auto gpu = gpu_attention<float, float>(alloc, qkv, dout, s);
    expect_close(gpu.out, cpu.out, 1e-5, "fp32 out " + s.name());
    expect_lse_close(gpu.lse, lse_reference(qkv, s), "fp32 " + s.name());
    expect_dqkv_close(gpu.dqkv, cpu.dqkv, s, 1e-4, "fp32 " + s.name());
  }
}

TEST(CudaAttention, Bf16MatchesCpuKernelOnRoundedInputs) {
  MESHTRAIN_REQUIRE_GPU();
  CudaAllocator alloc;
  uint64_t seed = 100;
  for (const Shape& s : kShapes) {
    const std::vector<float> qkv = rounded_to_bf16(random_floats(s.qkv_size(), seed++));
    const std::vector<float> dout = rounded_to_bf16(random_floats(s.out_size(), seed++));
    const CpuResult cpu = cpu_attention(qkv, dout, s);
    const std::vector<double> lse = lse_reference(qkv, s);
    const auto f32 = gpu_attention<Bf16, float>(alloc, to_bf16_vector(qkv), to_bf16_vector(dout), s);
    expect_close(f32.out, cpu.out, 1e-2, "bf16->fp32 out " + s.name());
    expect_lse_close(f32.lse, lse, "bf16->fp32 " + s.name());
    expect_dqkv_close(f32.dqkv, cpu.dqkv, s, 1e-2, "bf16->fp32 " + s.name());
    const auto b16 = gpu_attention<Bf16, Bf16>(alloc, to_bf16_vector(qkv), to_bf16_vector(dout), s);
    expect_close(widened(b16.out), cpu.out, 1e-2, "bf16->bf16 out " + s.name());
    expect_lse_close(b16.lse, lse, "bf16->bf16 " + s.name());
    expect_dqkv_close(b16.dqkv, cpu.dqkv, s, 1e-2, "bf16->bf16 " + s.name());
  }
}

TEST(CudaAttention, SameBitsTwice) {
  MESHTRAIN_REQUIRE_GPU();
  CudaAllocator alloc;
  for (const Shape& s : {kShapes[0], kShapes[1], kShapes[4]}) {
    const std::vector<float> qkv = random_floats(s.qkv_size(), 7);
    const std::vector<float> dout = random_floats(s.out_size(), 8);
    const auto a = gpu_attention<float, float>(alloc, qkv, dout, s);
    const auto b = gpu_attention<float, float>(alloc, qkv, dout, s);
    EXPECT_EQ(bytes_of(a.out), bytes_of(b.out)) << "out " << s.name();
    EXPECT_EQ(bytes_of(a.lse), bytes_of(b.lse)) << "lse " << s.name();
    EXPECT_EQ(bytes_of(a.dqkv), bytes_of(b.dqkv)) << "dqkv " << s.name();
  }
}

// Checked on the host before any device work, so it needs no GPU.
TEST(CudaAttention, RejectsUnsupportedHeadSizes) {
  EXPECT_TRUE(attention_head_size_supported(64));
  EXPECT_TRUE(attention_head_size_supported(8));
  EXPECT_TRUE(attention_head_size_supported(128));
  EXPECT_FALSE(attention_head_size_supported(12));
  EXPECT_FALSE(attention_head_size_supported(136));
  struct Bad {
    int64_t C, NH;
    const char* says;
  };
  for (const Bad& bad : {Bad{36, 3, "head size 12"}, Bad{136, 1, "head size 136"}, Bad{4, 1, "head size 4"},
                         Bad{65, 2, "not a positive multiple of NH"}}) {
    try {
      attention_forward(static_cast<float*>(nullptr), nullptr, static_cast<const float*>(nullptr), 1, 4, bad.C,
                        bad.NH, true, nullptr);
      ADD_FAILURE() << "C = " << bad.C << ", NH = " << bad.NH << " accepted";
    } catch (const DeviceError& e) {
      EXPECT_NE(std::string(e.what()).find(bad.says), std::string::npos) << e.what();
    }
    EXPECT_THROW(attention_backward(nullptr, nullptr, static_cast<const float*>(nullptr),
                                    static_cast<const float*>(nullptr), nullptr,
                                    static_cast<const float*>(nullptr), 1, 4, bad.C, bad.NH, true, nullptr),
                 DeviceError);
  }
}

}  // namespace
}  // namespace meshtrain::kernels::cuda
