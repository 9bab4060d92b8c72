// cuBLASLt's products (kernels/cuda/matmul.hpp) against the CPU GEMM
// (kernels/gemm.hpp) on the same values: every form, every epilogue, fp32
// and bf16 operands, ragged shapes, and the same bits when run twice. Every
// test runs in both weight layouts (the test parameter: .../InOut and
// .../OutIn), the reference calling gemm with the weight as stored: (K, N)
// as is for InOut (meshtrain's Conv1D layout), (N, K) transposed for OutIn.
//
// Tolerances are relative to scale = sum_k |a_k b_k| (+ |bias|, + |init|
// when accumulating), the size of the rounding errors of any summation
// order: fp32 1e-5 (CUBLAS_COMPUTE_32F is IEEE fp32, no TF32), bf16 1e-2
// (bf16 outputs round to 8 bits; products of bf16 numbers are exact, so the
// reference multiplies the bf16-rounded values in fp32). The GELU epilogues
// allow 2e-3 in fp32: cuBLASLt may evaluate tanh with the hardware's
// approximation. Each check prints its worst error / scale, so a GPU run
// shows how much margin is left.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpu_test_util.hpp"
#include "meshtrain/core/bf16.hpp"
#include "meshtrain/kernels/cuda/matmul.hpp"
#include "meshtrain/kernels/gelu_math.hpp"
#include "meshtrain/kernels/gemm.hpp"

namespace meshtrain::kernels::cuda {
namespace {

using test::random_floats;

// The operand / output types of one run.
struct Types {
  MatmulType operands, out;
  const char* name;
};
constexpr Types kF32{MatmulType::F32, MatmulType::F32, "fp32->fp32"};
constexpr Types kBf16F32{MatmulType::BF16, MatmulType::F32, "bf16->fp32"};
constexpr Types kBf16{MatmulType::BF16, MatmulType::BF16, "bf16->bf16"};
constexpr Types kAllTypes[] = {kF32, kBf16F32, kBf16};

float tolerance(const Types& t) { return t.operands == MatmulType::F32 ? 1e-5f : 1e-2f; }
float gelu_tolerance(const Types& t) { return t.operands == MatmulType::F32 ? 2e-3f : 1e-2f; }

// Host values rounded to bf16 and widened back (exact), where the type is bf16.
std::vector<float> representable(std::vector<float> v, MatmulType type) {
  if (type == MatmulType::BF16)
    for (float& x : v) x = to_float(to_bf16(x));
  return v;
}

// A matrix or vector on the GPU in one type, with the exact values it holds
// (`values`: what the CPU reference computes with).
class DeviceMatrix {
 public:
  DeviceMatrix(CudaAllocator& alloc, MatmulType type, std::vector<float> values)
      : type_(type), values_(representable(std::move(values), type)) {
    if (type == MatmulType::F32) {
      f32_ = test::to_device(alloc, values_);
    } else {
      std::vector<Bf16> h(values_.size());
      for (size_t i = 0; i < h.size(); ++i) h[i] = to_bf16(values_[i]);
      bf16_ = test::to_device(alloc, h);
    }
  }
  // Filled with NaN, for an output whose every element must be written.
  static DeviceMatrix poisoned(CudaAllocator& alloc, MatmulType type, size_t n) {
    DeviceMatrix m(type);
    if (type == MatmulType::F32)
      m.f32_ = test::poisoned<float>(alloc, n);
    else
      m.bf16_ = test::poisoned<Bf16>(alloc, n);
    return m;
  }

  MatmulInput in() const { return type_ == MatmulType::F32 ? MatmulInput(f32_.ptr()) : MatmulInput(bf16_.ptr()); }
  MatmulOutput out() { return type_ == MatmulType::F32 ? MatmulOutput(f32_.ptr()) : MatmulOutput(bf16_.ptr()); }
  const std::vector<float>& values() const { return values_; }
  std::vector<float> download() const {
    if (type_ == MatmulType::F32) return test::to_host(f32_);
    const std::vector<Bf16> h = test::to_host(bf16_);
    std::vector<float> v(h.size());
    for (size_t i = 0; i < h.size(); ++i) v[i] = to_float(h[i]);
    return v;
  }
  std::vector<unsigned char> bytes() const {  // for bitwise comparisons
    std::vector<unsigned char> b;
    if (type_ == MatmulType::F32) {
      const auto h = test::to_host(f32_);
      b.resize(h.size() * sizeof(float));
      std::memcpy(b.data(), h.data(), b.size());
    } else {
      const auto h = test::to_host(bf16_);
      b.resize(h.size() * sizeof(Bf16));
      std::memcpy(b.data(), h.data(), b.size());
    }
    return b;
  }

 private:
  explicit DeviceMatrix(MatmulType type) : type_(type) {}
  MatmulType type_;
  std::vector<float> values_;
  DeviceBuffer<float> f32_;
  DeviceBuffer<Bf16> bf16_;
};

std::vector<float> abs_of(std::vector<float> v) {
  for (float& x : v) x = std::fabs(x);
  return v;
}

// Row-major references with the CPU GEMM, the weight as stored (s.layout):
// W (K, N) for InOut, W (N, K) for OutIn. (M, N, K) as in matmul.hpp.
bool in_out(MatmulShape s) { return s.layout == WeightLayout::InOut; }

// out (M, N) = inp (M, K) @ W (K, N)  |  inp (M, K) @ W (N, K)^T
std::vector<float> cpu_forward(const std::vector<float>& inp, const std::vector<float>& weight, MatmulShape s) {
  std::vector<float> out(size_t(s.M) * s.N);
  if (in_out(s))
    gemm(Trans::No, Trans::No, s.M, s.N, s.K, 1.0f, inp.data(), s.K, weight.data(), s.N, 0.0f, out.data(), s.N);
  else
    gemm(Trans::No, Trans::Yes, s.M, s.N, s.K, 1.0f, inp.data(), s.K, weight.data(), s.K, 0.0f, out.data(), s.N);
  return out;
}
// dinp (M, K) = dout (M, N) @ W (K, N)^T  |  dout (M, N) @ W (N, K)
std::vector<float> cpu_backward_input(const std::vector<float>& dout, const std::vector<float>& weight,
                                      MatmulShape s) {
  std::vector<float> dinp(size_t(s.M) * s.K);
  if (in_out(s))
    gemm(Trans::No, Trans::Yes, s.M, s.K, s.N, 1.0f, dout.data(), s.N, weight.data(), s.N, 0.0f, dinp.data(), s.K);
  else
    gemm(Trans::No, Trans::No, s.M, s.K, s.N, 1.0f, dout.data(), s.N, weight.data(), s.K, 0.0f, dinp.data(), s.K);
  return dinp;
}
// dW (K, N) = inp (M, K)^T @ dout (M, N)  |  dW (N, K) = dout (M, N)^T @ inp (M, K)
std::vector<float> cpu_backward_weight(const std::vector<float>& dout, const std::vector<float>& inp, MatmulShape s) {
  std::vector<float> dweight(size_t(s.N) * s.K);
  if (in_out(s))
    gemm(Trans::Yes, Trans::No, s.K, s.N, s.M, 1.0f, inp.data(), s.K, dout.data(), s.N, 0.0f, dweight.data(), s.N);
  else
    gemm(Trans::Yes, Trans::No, s.N, s.K, s.M, 1.0f, dout.data(), s.N, inp.data(), s.K, 0.0f, dweight.data(), s.K);
  return dweight;
}

// x[i] += y[i]; y of length n repeats along x (a bias over rows) when shorter.
void add_to(std::vector<float>& x, const std::vector<float>& y) {
  for (size_t i = 0; i < x.size(); ++i) x[i] += y[i % y.size()];
}

// Every |got - want| within rel * scale (NaN fails); prints the worst ratio.
void expect_close(const std::vector<float>& got, const std::vector<float>& want, const std::vector<float>& scale,
                  float rel, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t bad = 0, first_bad = 0;
  double worst = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(double(got[i]) - double(want[i]));
    const double s = std::max(double(scale[i]), 1e-30);
    if (!(err <= rel * s)) {
      if (bad++ == 0) first_bad = i;
    }
    if (err / s > worst || std::isnan(err)) worst = std::isnan(err) ? INFINITY : err / s;
  }
  std::printf("[ matmul   ] %-66s worst |err|/scale %.3g (allowed %.0e)\n", what.c_str(), worst, double(rel));
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << got.size() << " elements off; first at " << first_bad
                     << ": got " << got[first_bad] << ", want " << want[first_bad] << ", scale "
                     << scale[first_bad];
}

std::string label(const char* form, const Types& t, MatmulShape s) {
  return std::string(form) + " " + weight_layout_name(s.layout) + " " + t.name + " M=" + std::to_string(s.M) +
         " N=" + std::to_string(s.N) + " K=" + std::to_string(s.K);
}

// The ragged shape of GPT-2's classifier (V = 50257, unpadded) and small
// ones, none a multiple of a tile.
const MatmulShape kShapes[] = {{37, 50257, 96}, {1, 1, 1}, {3, 5, 7}, {17, 33, 65}, {64, 128, 256}};

// Every test, once per weight layout.
class CudaMatmul : public ::testing::TestWithParam<WeightLayout> {
 protected:
  // A shape in this run's layout.
  MatmulShape shape(int M, int N, int K) const { return MatmulShape{M, N, K, GetParam()}; }
  MatmulShape shape(MatmulShape s) const { return shape(s.M, s.N, s.K); }
};

INSTANTIATE_TEST_SUITE_P(Layout, CudaMatmul, ::testing::Values(WeightLayout::InOut, WeightLayout::OutIn),
                         [](const ::testing::TestParamInfo<WeightLayout>& info) {
                           return std::string(weight_layout_name(info.param));
                         });

TEST_P(CudaMatmul, ForwardMatchesCpuGemm) {
  MESHTRAIN_REQUIRE_GPU();
  CudaAllocator alloc;
  CublasLtContext ctx(alloc);
  uint64_t seed = 1;
  for (const Types& t : kAllTypes) {
    for (const MatmulShape base : kShapes) {
      const MatmulShape s = shape(base);
      DeviceMatrix inp(alloc, t.operands, random_floats(size_t(s.M) * s.K, seed++));
      DeviceMatrix weight(alloc, t.operands, random_floats(size_t(s.N) * s.K, seed++));
      DeviceMatrix out = DeviceMatrix::poisoned(alloc, t.out, size_t(s.M) * s.N);
      ctx.forward(out.out(), inp.in(), weight.in(), s);
      expect_close(out.download(), cpu_forward(inp.values(), weight.values(), s),
                   cpu_forward(abs_of(inp.values()), abs_of(weight.values()), s), tolerance(t),
                   label("forward", t, s));
    }
  }
}

TEST_P(CudaMatmul, BackwardInputMatchesCpuGemm) {
  MESHTRAIN_REQUIRE_GPU();
  CudaAllocator alloc;
  CublasLtContext ctx(alloc);
  uint64_t seed = 100;
  for (const Types& t : kAllTypes) {
    for (const MatmulShape base : kShapes) {
      const MatmulShape s = shape(base);
      DeviceMatrix dout(alloc, t.operands, random_floats(size_t(s.M) * s.N, seed++));
      DeviceMatrix weight(alloc, t.operands, random_floats(size_t(s.N) * s.K, seed++));
      DeviceMatrix dinp = DeviceMatrix::poisoned(alloc, t.out, size_t(s.M) * s.K);
      ctx.backward_input(dinp.out(), dout.in(), weight.in(), s);
      expect_close(dinp.download(), cpu_backward_input(dout.values(), weight.values(), s),
                   cpu_backward_input(abs_of(dout.values()), abs_of(weight.values()), s), tolerance(t),
                   label("backward_input", t, s));
    }
  }
}

TEST_P(CudaMatmul, BackwardWeightMatchesCpuGemm) {
  MESHTRAIN_REQUIRE_GPU();
  CudaAllocator alloc;
  CublasLtContext ctx(alloc);
  uint64_t seed = 200;
  for (const Types& t : kAllTypes) {
    for (const MatmulShape base : kShapes) {
      const MatmulShape s = shape(base);
      DeviceMatrix dout(alloc, t.operands, random_floats(size_t(s.M) * s.N, seed++));
      DeviceMatrix inp(alloc, t.operands, random_floats(size_t(s.M) * s.K, seed++));
      DeviceMatrix dweight = DeviceMatrix::poisoned(alloc, t.out, size_t(s.N) * s.K);
      ctx.backward_weight(dweight.out(), dout.in(), inp.in(), s);
      expect_close(dweight.download(), cpu_backward_weight(dout.values(), inp.values(), s),
                   cpu_backward_weight(abs_of(dout.values()), abs_of(inp.values()), s), tolerance(t),
                   label("backward_weight", t, s));
    }
  }
}

// beta = 1: each form adds to what the output held.
TEST_P(CudaMatmul, AccumulateAddsToTheOutput) {
  MESHTRAIN_REQUIRE_GPU();
  CudaAllocator alloc;
  CublasLtContext ctx(alloc);
  const MatmulShape s = shape(37, 50, 96);
  uint64_t seed = 300;
  for (const Types& t : kAllTypes) {
    DeviceMatrix x(alloc, t.operands, random_floats(size_t(s.M) * s.K, seed++));   // inp (M, K)
    DeviceMatrix w(alloc, t.operands, random_floats(size_t(s.N) * s.K, seed++));   // weight (K, N) or (N, K)
    DeviceMatrix g(alloc, t.operands, random_floats(size_t(s.M) * s.N, seed++));   // dout (M, N)

    DeviceMatrix out(alloc, t.out, random_floats(size_t(s.M) * s.N, seed++));
    std::vector<float> want = out.values(), scale = abs_of(out.values());
    add_to(want, cpu_forward(x.values(), w.values(), s));
    add_to(scale, cpu_forward(abs_of(x.values()), abs_of(w.values()), s));
    ctx.forward(out.out(), x.in(), w.in(), s, {}, /*accumulate=*/true);
    expect_close(out.download(), want, scale, tolerance(t), label("forward += ", t, s));

    DeviceMatrix dinp(alloc, t.out, random_floats(size_t(s.M) * s.K, seed++));
    want = dinp.values();
    scale = abs_of(dinp.values());
    add_to(want, cpu_backward_input(g.values(), w.values(), s));
    add_to(scale, cpu_backward_input(abs_of(g.values()), abs_of(w.values()), s));
    ctx.backward_input(dinp.out(), g.in(), w.in(), s, /*accumulate=*/true);
    expect_close(dinp.download(), want, scale, tolerance(t), label("backward_input += ", t, s));

    DeviceMatrix dweight(alloc, t.out, random_floats(size_t(s.N) * s.K, seed++));
    want = dweight.values();
    scale = abs_of(dweight.values());
    add_to(want, cpu_backward_weight(g.values(), x.values(), s));
    add_to(scale, cpu_backward_weight(abs_of(g.values()), abs_of(x.values()), s));
    ctx.backward_weight(dweight.out(), g.in(), x.in(), s, /*accumulate=*/true);
    expect_close(dweight.download(), want, scale, tolerance(t), label("backward_weight += ", t, s));
  }
}

// BIAS: out = forward's product + bias, alone and accumulating.
TEST_P(CudaMatmul, BiasEpilogue) {
  MESHTRAIN_REQUIRE_GPU();
  CudaAllocator alloc;
  CublasLtContext ctx(alloc);
  uint64_t seed = 400;
  for (const Types& t : kAllTypes) {
    for (const MatmulShape s : {shape(37, 50, 96), shape(37, 50257, 96)}) {
      DeviceMatrix x(alloc, t.operands, random_floats(size_t(s.M) * s.K, seed++));
      DeviceMatrix w(alloc, t.operands, random_floats(size_t(s.N) * s.K, seed++));
      DeviceMatrix bias(alloc, t.out, random_floats(size_t(s.N), seed++));
      std::vector<float> want = cpu_forward(x.values(), w.values(), s);
      std::vector<float> scale = cpu_forward(abs_of(x.values()), abs_of(w.values()), s);
      add_to(want, bias.values());
      add_to(scale, abs_of(bias.values()));

      DeviceMatrix out = DeviceMatrix::poisoned(alloc, t.out, size_t(s.M) * s.N);
      ctx.forward(out.out(), x.in(), w.in(), s, bias.in());
      expect_close(out.download(), want, scale, tolerance(t), label("forward BIAS", t, s));

      DeviceMatrix acc(alloc, t.out, random_floats(size_t(s.M) * s.N, seed++));
      add_to(want, acc.values());
      add_to(scale, abs_of(acc.values()));
      ctx.forward(acc.out(), x.in(), w.in(), s, bias.in(), /*accumulate=*/true);
      expect_close(acc.download(), want, scale, tolerance(t), label("forward BIAS +=", t, s));
    }
  }
}

// GELU_AUX[_BIAS]: pre = forward's product [+ bias], out = gelu(pre), pre kept.
TEST_P(CudaMatmul, GeluAuxEpilogue) {
  MESHTRAIN_REQUIRE_GPU();
  CudaAllocator alloc;
  CublasLtContext ctx(alloc);
  const MatmulShape s = shape(37, 200, 96);  // N a multiple of 8 (the saved matrix's row stride)
  uint64_t seed = 500;
  for (const Types& t : kAllTypes) {
    for (const bool with_bias : {false, true}) {
      DeviceMatrix x(alloc, t.operands, random_floats(size_t(s.M) * s.K, seed++));
      DeviceMatrix w(alloc, t.operands, random_floats(size_t(s.N) * s.K, seed++, -0.5f, 0.5f));
      DeviceMatrix bias(alloc, t.out, random_floats(size_t(s.N), seed++));
      std::vector<float> pre_want = cpu_forward(x.values(), w.values(), s);
      std::vector<float> scale = cpu_forward(abs_of(x.values()), abs_of(w.values()), s);
      if (with_bias) {
        add_to(pre_want, bias.values());
        add_to(scale, abs_of(bias.values()));
      }
      std::vector<float> out_want(pre_want.size());
      for (size_t i = 0; i < pre_want.size(); ++i) out_want[i] = detail::gelu_value(pre_want[i]);

      DeviceMatrix out = DeviceMatrix::poisoned(alloc, t.out, size_t(s.M) * s.N);
      DeviceMatrix pre = DeviceMatrix::poisoned(alloc, t.out, size_t(s.M) * s.N);
      ctx.forward_gelu(out.out(), pre.out(), x.in(), w.in(), s, with_bias ? bias.in() : MatmulInput{});
      const char* name = with_bias ? "forward GELU_AUX_BIAS" : "forward GELU_AUX";
      expect_close(pre.download(), pre_want, scale, tolerance(t), label(name, t, s) + " pre");
      expect_close(out.download(), out_want, scale, gelu_tolerance(t), label(name, t, s) + " out");
    }
  }
}

// DGELU: dinp = backward_input's product * gelu'(pre), pre (M, K) as GELU_AUX
// saved it.
TEST_P(CudaMatmul, DgeluEpilogue) {
  MESHTRAIN_REQUIRE_GPU();
  CudaAllocator alloc;
  CublasLtContext ctx(alloc);
  const MatmulShape s = shape(37, 50, 200);  // K a multiple of 8
  uint64_t seed = 600;
  for (const Types& t : kAllTypes) {
    DeviceMatrix g(alloc, t.operands, random_floats(size_t(s.M) * s.N, seed++));
    DeviceMatrix w(alloc, t.operands, random_floats(size_t(s.N) * s.K, seed++));
    DeviceMatrix pre(alloc, t.out, random_floats(size_t(s.M) * s.K, seed++, -4.0f, 4.0f));
    const std::vector<float> product = cpu_backward_input(g.values(), w.values(), s);
    std::vector<float> scale = cpu_backward_input(abs_of(g.values()), abs_of(w.values()), s);
    std::vector<float> want(product.size());
    for (size_t i = 0; i < want.size(); ++i) {
      const float slope = detail::gelu_slope(pre.values()[i]);
      want[i] = product[i] * slope;
      scale[i] *= std::max(std::fabs(slope), 1.0f);
    }
    DeviceMatrix dinp = DeviceMatrix::poisoned(alloc, t.out, size_t(s.M) * s.K);
    ctx.backward_input_gelu(dinp.out(), pre.in(), g.in(), w.in(), s);
    expect_close(dinp.download(), want, scale, gelu_tolerance(t), label("backward_input DGELU", t, s));
  }
}

// BGRADA (InOut) / BGRADB (OutIn): dweight [+]= backward_weight's product and
// dbias = the column sums of dout (overwritten even when dweight accumulates).
TEST_P(CudaMatmul, BiasGradientEpilogue) {
  MESHTRAIN_REQUIRE_GPU();
  CudaAllocator alloc;
  CublasLtContext ctx(alloc);
  uint64_t seed = 700;
  for (const Types& t : kAllTypes) {
    for (const MatmulShape s : {shape(37, 50, 96), shape(256, 64, 32)}) {
      for (const bool accumulate : {false, true}) {
        DeviceMatrix g(alloc, t.operands, random_floats(size_t(s.M) * s.N, seed++));
        DeviceMatrix x(alloc, t.operands, random_floats(size_t(s.M) * s.K, seed++));
        DeviceMatrix dweight = accumulate ? DeviceMatrix(alloc, t.out, random_floats(size_t(s.N) * s.K, seed++))
                                          : DeviceMatrix::poisoned(alloc, t.out, size_t(s.N) * s.K);
        std::vector<float> want = cpu_backward_weight(g.values(), x.values(), s);
        std::vector<float> scale = cpu_backward_weight(abs_of(g.values()), abs_of(x.values()), s);
        if (accumulate) {
          add_to(want, dweight.values());
          add_to(scale, abs_of(dweight.values()));
        }
        // The bias gradient starts as garbage other than NaN: it must be overwritten.
        DeviceMatrix dbias(alloc, t.out, std::vector<float>(size_t(s.N), 1e3f));
        std::vector<float> dbias_want(s.N, 0.0f), dbias_scale(s.N, 0.0f);
        for (int m = 0; m < s.M; ++m)
          for (int n = 0; n < s.N; ++n) {
            dbias_want[n] += g.values()[size_t(m) * s.N + n];
            dbias_scale[n] += std::fabs(g.values()[size_t(m) * s.N + n]);
          }
        ctx.backward_weight(dweight.out(), g.in(), x.in(), s, accumulate, dbias.out());
        const std::string name = accumulate ? "backward_weight BGRAD +=" : "backward_weight BGRAD";
        expect_close(dweight.download(), want, scale, tolerance(t), label(name.c_str(), t, s));
        expect_close(dbias.download(), dbias_want, dbias_scale, tolerance(t), label(name.c_str(), t, s) + " dbias");
      }
    }
  }
}

// The same product twice gives the same bits (one plan, one algorithm).
TEST_P(CudaMatmul, RepeatsItsBits) {
  MESHTRAIN_REQUIRE_GPU();
  CudaAllocator alloc;
  CublasLtContext ctx(alloc);
  const MatmulShape s = shape(37, 50257, 96);
  uint64_t seed = 800;
  for (const Types& t : kAllTypes) {
    SCOPED_TRACE(t.name);
    DeviceMatrix x(alloc, t.operands, random_floats(size_t(s.M) * s.K, seed++));
    DeviceMatrix w(alloc, t.operands, random_floats(size_t(s.N) * s.K, seed++));
    DeviceMatrix g(alloc, t.operands, random_floats(size_t(s.M) * s.N, seed++));
    DeviceMatrix bias(alloc, t.out, random_floats(size_t(s.N), seed++));
    const std::vector<float> dweight0 = random_floats(size_t(s.N) * s.K, seed++);

    std::vector<unsigned char> first[3];
    for (int run = 0; run < 2; ++run) {
      const size_t plans_before = ctx.plan_count();
      DeviceMatrix out = DeviceMatrix::poisoned(alloc, t.out, size_t(s.M) * s.N);
      DeviceMatrix dinp = DeviceMatrix::poisoned(alloc, t.out, size_t(s.M) * s.K);
      DeviceMatrix dweight(alloc, t.out, dweight0);
      ctx.forward(out.out(), x.in(), w.in(), s, bias.in());
      ctx.backward_input(dinp.out(), g.in(), w.in(), s);
      ctx.backward_weight(dweight.out(), g.in(), x.in(), s, /*accumulate=*/true);
      const std::vector<unsigned char> now[3] = {out.bytes(), dinp.bytes(), dweight.bytes()};
      if (run == 0) {
        for (int i = 0; i < 3; ++i) first[i] = now[i];
      } else {
        EXPECT_EQ(ctx.plan_count(), plans_before) << "the second run made new plans";
        EXPECT_TRUE(now[0] == first[0]) << "forward differs between two runs";
        EXPECT_TRUE(now[1] == first[1]) << "backward_input differs between two runs";
        EXPECT_TRUE(now[2] == first[2]) << "backward_weight differs between two runs";
      }
    }
  }
}

// The layout is part of a plan's key: the same sizes in the two layouts are
// two plans, and W (K, N) in InOut gives what its transpose gives in OutIn.
TEST(CudaMatmulLayouts, EachLayoutHasItsOwnPlans) {
  MESHTRAIN_REQUIRE_GPU();
  CudaAllocator alloc;
  CublasLtContext ctx(alloc);
  const MatmulShape in_out{37, 50, 96, WeightLayout::InOut}, out_in{37, 50, 96, WeightLayout::OutIn};
  const std::vector<float> w = random_floats(size_t(in_out.K) * in_out.N, 900);  // (K, N)
  std::vector<float> wt(w.size());                                                // (N, K)
  for (int k = 0; k < in_out.K; ++k)
    for (int n = 0; n < in_out.N; ++n) wt[size_t(n) * in_out.K + k] = w[size_t(k) * in_out.N + n];
  DeviceMatrix x(alloc, MatmulType::F32, random_floats(size_t(in_out.M) * in_out.K, 901));
  DeviceMatrix w_in_out(alloc, MatmulType::F32, w), w_out_in(alloc, MatmulType::F32, wt);
  DeviceMatrix out1 = DeviceMatrix::poisoned(alloc, MatmulType::F32, size_t(in_out.M) * in_out.N);
  DeviceMatrix out2 = DeviceMatrix::poisoned(alloc, MatmulType::F32, size_t(in_out.M) * in_out.N);
  ctx.forward(out1.out(), x.in(), w_in_out.in(), in_out);
  ctx.forward(out2.out(), x.in(), w_out_in.in(), out_in);
  EXPECT_EQ(ctx.plan_count(), 2u);
  expect_close(out1.download(), out2.download(), cpu_forward(abs_of(x.values()), abs_of(w), in_out), 1e-5f,
               "forward InOut W vs OutIn W^T");
}

// Calls that break the contract say which rule, before cuBLASLt sees them.
TEST_P(CudaMatmul, RejectsBadCalls) {
  MESHTRAIN_REQUIRE_GPU();
  CudaAllocator alloc;
  CublasLtContext ctx(alloc);
  const MatmulShape s = shape(8, 16, 24);
  auto f32 = test::to_device(alloc, std::vector<float>(1024, 0.0f));
  auto bf16 = test::to_device(alloc, std::vector<Bf16>(1024, Bf16{0}));
  auto expect_invalid = [](auto&& call, const std::string& words) {
    try {
      call();
      ADD_FAILURE() << "no error; expected one saying '" << words << "'";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  // fp32 operands with a bf16 output: no such cuBLASLt product.
  expect_invalid([&] { ctx.forward(bf16.ptr(), f32.ptr(), f32.ptr(), s); }, "fp32 operands give an fp32 output");
  // Mixed operand types.
  expect_invalid([&] { ctx.forward(f32.ptr(), f32.ptr(), bf16.ptr(), s); }, "weight is bf16, not fp32");
  // A bias of another type than the output.
  expect_invalid([&] { ctx.forward(f32.ptr(), bf16.ptr(), bf16.ptr(), s, bf16.ptr()); }, "bias is bf16, not fp32");
  // A pointer off the 16-byte grid.
  expect_invalid([&] { ctx.forward(f32.ptr() + 1, f32.ptr(), f32.ptr(), s); }, "out is not 16-byte aligned");
  // The GELU's saved matrix needs rows of a multiple of 8 elements.
  expect_invalid([&] { ctx.forward_gelu(f32.ptr(), f32.ptr() + 512, f32.ptr(), f32.ptr(), shape(8, 12, 24)); },
                 "multiple of 8");
  expect_invalid([&] { ctx.forward(f32.ptr(), f32.ptr(), f32.ptr(), shape(0, 16, 24)); }, "at least 1");
  EXPECT_EQ(ctx.plan_count(), 0u);
}

}  // namespace
}  // namespace meshtrain::kernels::cuda
