// bf16 GEMM through oneDNN's matmul primitive (see gemm_bf16.hpp).
//
// A primitive is built for one shape, set of strides, beta and thread count
// (oneDNN plans its split when it builds one; inside a parallel region it
// runs on the calling thread alone), so each thread keeps the ones it built:
// a training step calls the same few dozen shapes every step, so after the
// first step every call is a look-up.
#include "meshtrain/kernels/gemm_bf16.hpp"

#include <dnnl.hpp>
#include <omp.h>

#include <cstring>
#include <map>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace meshtrain::kernels {
namespace {

using dnnl::memory;

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// op(X) is rows x cols stored with row stride ld; transposed storage is
// expressed as strides, not copied.
memory::desc operand(memory::data_type type, int rows, int cols, int ld, Trans t) {
  const memory::dims strides = t == Trans::No ? memory::dims{ld, 1} : memory::dims{1, ld};
  return memory::desc({rows, cols}, type, strides);
}

struct PrimitiveKey {
  Trans ta, tb;
  int M, N, K, lda, ldb, ldc;
  float alpha, beta;
  int threads;
  bool bias;
  bool bf16_dst = false;  // C in bf16 (gemm_bf16_rounded)
  auto tie() const { return std::tie(ta, tb, M, N, K, lda, ldb, ldc, alpha, beta, threads, bias, bf16_dst); }
  bool operator<(const PrimitiveKey& o) const { return tie() < o.tie(); }
};

struct Primitive {
  dnnl::matmul matmul;
  memory::desc a, b, c, bias;
  std::string impl;
  // Made once and pointed at each call's arrays (set_data_handle), with the
  // execute arguments that name them: making either per call allocated on
  // the heap thousands of times a step (attention's per-head products).
  memory a_mem, b_mem, c_mem, bias_mem;
  std::unordered_map<int, memory> args;
};

Primitive build(const PrimitiveKey& k) {
  Primitive p;
  p.a = operand(memory::data_type::bf16, k.M, k.K, k.lda, k.ta);
  p.b = operand(memory::data_type::bf16, k.K, k.N, k.ldb, k.tb);
  p.c = operand(k.bf16_dst ? memory::data_type::bf16 : memory::data_type::f32, k.M, k.N, k.ldc, Trans::No);
  dnnl::primitive_attr attr;
  if (k.alpha != 1.0f) attr.set_output_scales(0, {k.alpha});
  if (k.beta != 0.0f) {
    dnnl::post_ops ops;
    ops.append_sum(k.beta);
    attr.set_post_ops(ops);
  }
  // A bias row is added in the kernel's epilogue, as the accumulators are
  // stored (a sum post-op instead reads C back: 7-10% slower on the model's
  // forward shapes, measured).
  if (k.bias) p.bias = memory::desc({1, k.N}, memory::data_type::f32, memory::dims{k.N, 1});
  auto desc = k.bias ? dnnl::matmul::desc(p.a, p.b, p.bias, p.c) : dnnl::matmul::desc(p.a, p.b, p.c);
  auto pd = dnnl::matmul::primitive_desc(desc, attr, cpu_engine());
  p.impl = pd.impl_info_str();
  p.matmul = dnnl::matmul(pd);
  p.a_mem = memory(p.a, cpu_engine(), DNNL_MEMORY_NONE);
  p.b_mem = memory(p.b, cpu_engine(), DNNL_MEMORY_NONE);
  p.c_mem = memory(p.c, cpu_engine(), DNNL_MEMORY_NONE);
  p.args = {{DNNL_ARG_SRC, p.a_mem}, {DNNL_ARG_WEIGHTS, p.b_mem}, {DNNL_ARG_DST, p.c_mem}};
  if (k.bias) {
    p.bias_mem = memory(p.bias, cpu_engine(), DNNL_MEMORY_NONE);
    p.args.emplace(DNNL_ARG_BIAS, p.bias_mem);
  }
  return p;
}

// Whether oneDNN has a kernel of its own for bf16 here (AVX-512 and up) or
// only its reference loops, decided once on a typical shape.
bool onednn_has_bf16_kernel() {
  static const bool has = [] {
    const Primitive p = build({Trans::No, Trans::No, 64, 64, 64, 64, 64, 64, 1.0f, 0.0f, 1, false});  // f32 dst
    return p.impl.find("ref") == std::string::npos;
  }();
  return has;
}

void zero_k(int M, int N, float beta, float* C, int ldc) {  // C = beta C when K = 0
  for (int i = 0; i < M; ++i) {
    float* c = C + size_t(i) * ldc;
    if (beta == 0.0f) std::memset(c, 0, sizeof(float) * N);
    else for (int j = 0; j < N; ++j) c[j] *= beta;
  }
}

// Runs the product of `key` (its thread count filled in here) on this
// thread's cached primitive for it.
void run(PrimitiveKey key, const Bf16* A, const Bf16* B, void* C, const float* bias) {
  thread_local std::map<PrimitiveKey, Primitive> primitives;
  thread_local dnnl::stream stream(cpu_engine());
  key.threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  auto it = primitives.find(key);
  if (it == primitives.end()) it = primitives.emplace(key, build(key)).first;
  Primitive& p = it->second;
  p.a_mem.set_data_handle(const_cast<Bf16*>(A));
  p.b_mem.set_data_handle(const_cast<Bf16*>(B));
  p.c_mem.set_data_handle(C);
  if (bias) p.bias_mem.set_data_handle(const_cast<float*>(bias));
  p.matmul.execute(stream, p.args);
  stream.wait();
}

}  // namespace

void gemm_bf16(Trans trans_a, Trans trans_b, int M, int N, int K, float alpha, const Bf16* A, int lda,
               const Bf16* B, int ldb, float beta, float* C, int ldc, const float* bias) {
  if (M <= 0 || N <= 0) return;
  if (bias && (K <= 0 || alpha != 1.0f || !onednn_has_bf16_kernel())) {
    // The bias as a first pass over C (oneDNN would add it before alpha).
    for (int i = 0; i < M; ++i) {
      float* c = C + size_t(i) * ldc;
      for (int j = 0; j < N; ++j) c[j] = (beta == 0.0f ? 0.0f : beta * c[j]) + bias[j];
    }
    return gemm_bf16(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, 1.0f, C, ldc);
  }
  if (K <= 0) return zero_k(M, N, beta, C, ldc);
  if (!onednn_has_bf16_kernel())
    return detail::gemm_bf16_widened(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  run(PrimitiveKey{trans_a, trans_b, M, N, K, lda, ldb, ldc, alpha, beta, 0, bias != nullptr}, A, B, C, bias);
}

void gemm_bf16_rounded(Trans trans_a, Trans trans_b, int M, int N, int K, const Bf16* A, int lda, const Bf16* B,
                       int ldb, Bf16* C, int ldc, const float* bias) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0 || !onednn_has_bf16_kernel()) {  // through fp32, rounded after
    thread_local std::vector<float> c;
    c.resize(size_t(M) * N);
    gemm_bf16(trans_a, trans_b, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, c.data(), N, bias);
    for (int i = 0; i < M; ++i) to_bf16(c.data() + size_t(i) * N, C + size_t(i) * ldc, size_t(N));
    return;
  }
  PrimitiveKey key{trans_a, trans_b, M, N, K, lda, ldb, ldc, 1.0f, 0.0f, 0, bias != nullptr};
  key.bf16_dst = true;
  run(key, A, B, C, bias);
}

const char* gemm_bf16_backend_name() {
  static const std::string name = [] {
    if (!onednn_has_bf16_kernel()) return std::string("widened fp32 (no bf16 kernel on this CPU)");
    return "onednn " + build({Trans::No, Trans::No, 512, 512, 512, 512, 512, 512, 1.0f, 0.0f, 1, false}).impl;
  }();
  return name.c_str();
}

namespace detail {

void gemm_bf16_widened(Trans trans_a, Trans trans_b, int M, int N, int K, float alpha, const Bf16* A, int lda,
                       const Bf16* B, int ldb, float beta, float* C, int ldc) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) return zero_k(M, N, beta, C, ldc);
  thread_local std::vector<float> a, b;
  // Stored extents: the last row holds only its columns, not a whole stride.
  const size_t a_size = size_t((trans_a == Trans::No ? M : K) - 1) * lda + (trans_a == Trans::No ? K : M);
  const size_t b_size = size_t((trans_b == Trans::No ? K : N) - 1) * ldb + (trans_b == Trans::No ? N : K);
  a.resize(a_size);
  b.resize(b_size);
  to_float(A, a.data(), a_size);
  to_float(B, b.data(), b_size);
  gemm(trans_a, trans_b, M, N, K, alpha, a.data(), lda, b.data(), ldb, beta, C, ldc);
}

}  // namespace detail
}  // namespace meshtrain::kernels
