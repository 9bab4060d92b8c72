// bench_gemm: GFLOP/s of the packed AVX-512 kernel ("ours",
// detail::gemm_packed, kernels::gemm's MESHTRAIN_GEMM=packed path) against oneDNN (dnnl_sgemm) and
// OpenBLAS (cblas_sgemm, dlopen'ed, environment left as it stands, so
// OPENBLAS_CORETYPE=Haswell applies) on the model's GEMM shapes, at 1 and 2
// threads, as a percentage of the FMA peak measured in the same run.
//
// Peak: 24 independent zmm FMA chains per thread in registers only, no loads
// (ymm on a CPU without AVX-512; `--peak` prints only that).
// Shapes: tokens M = batch 8 x ctx. Config A d=256 ctx=128 (M=1024), config
// B d=384 ctx=256 (M=2048), vocab 256. Forward y = x W is NN with W (in, out);
// backward dx = dy W^T is NT, dW += x^T dy is TN with beta = 1. Attention
// shapes are per head (head dim 64) and run one GEMM per thread at once, as
// attention calls them inside its parallel loop.
//
// The bf16 column is kernels::gemm_bf16 (training.precision = "bf16": bf16
// operands, fp32 sums and output) on the same shapes, with its ratio to
// oneDNN's fp32; its path (AMX, AVX512-BF16, or widened fp32) is printed
// first, and "bf16 peak" is its rate on the 2048 square, the machine's
// measured bf16 GEMM peak that end-to-end bf16 figures are a share of.
//
// Usage: bench_gemm [--quick] [--sweep] [--cpu-clock] [--peak] [--bf16-peak]
// (--bf16-peak: only the "bf16 peak" line, for the end-to-end bf16 benchmarks.)
#include <dlfcn.h>
#include <dnnl.h>
// GCC 12 flags its own _mm512_undefined_* helpers as maybe-uninitialized.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "meshtrain/kernels/gemm.hpp"
#include "meshtrain/kernels/gemm_avx512.hpp"
#include "meshtrain/kernels/gemm_bf16.hpp"

using meshtrain::kernels::Trans;
namespace detail = meshtrain::kernels::detail;

namespace {

// Wall clock, or with --cpu-clock this process's CPU time: on 2 vCPUs shared
// with other jobs that discounts time spent descheduled (1-thread runs only).
bool g_cpu_clock = false;
double now() {
  timespec ts;
  clock_gettime(g_cpu_clock ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

// ---- FMA peak ------------------------------------------------------------------

constexpr int kChains = 24;

__attribute__((target("avx512f"), noinline)) float fma_chains(long iters) {
  __m512 acc[kChains];
  __m512 m = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
#pragma GCC unroll 24
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_ps(float(i));
  for (long t = 0; t < iters; ++t) {
#pragma GCC unroll 24
    for (int i = 0; i < kChains; ++i) acc[i] = _mm512_fmadd_ps(acc[i], m, b);
  }
  __m512 s = acc[0];
#pragma GCC unroll 24
  for (int i = 1; i < kChains; ++i) s = _mm512_add_ps(s, acc[i]);
  return _mm512_reduce_add_ps(s);
}

// The same with ymm registers, for CPUs without AVX-512 (AVX2 + FMA).
__attribute__((target("avx2,fma"), noinline)) float fma_chains_avx2(long iters) {
  __m256 acc[kChains];
  __m256 m = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
#pragma GCC unroll 24
  for (int i = 0; i < kChains; ++i) acc[i] = _mm256_set1_ps(float(i));
  for (long t = 0; t < iters; ++t) {
#pragma GCC unroll 24
    for (int i = 0; i < kChains; ++i) acc[i] = _mm256_fmadd_ps(acc[i], m, b);
  }
  __m256 s = acc[0];
#pragma GCC unroll 24
  for (int i = 1; i < kChains; ++i) s = _mm256_add_ps(s, acc[i]);
  float lanes[8];
  _mm256_storeu_ps(lanes, s);
  return lanes[0] + lanes[7];
}

// The widest FMA this CPU runs, chosen at run time: flops per FMA instruction.
bool has_avx512() { return __builtin_cpu_supports("avx512f"); }
double flops_per_fma() { return has_avx512() ? 32.0 : 16.0; }

// Best of 20 runs of ~30 ms each, GFLOP/s summed over threads.
double measure_peak(int threads) {
  const long iters = 4'000'000;
  const bool wide = has_avx512();
  double best = 0;
  for (int rep = 0; rep < 20; ++rep) {
    float sink = 0;
    double t0 = now();
#pragma omp parallel num_threads(threads) reduction(+ : sink)
    sink += wide ? fma_chains(iters) : fma_chains_avx2(iters);
    double s = now() - t0;
    best = std::max(best, threads * iters * kChains * flops_per_fma() / s / 1e9);
    if (sink == 1234.5f) std::printf(" ");
  }
  return best;
}

// Core clock from a chain of dependent integer adds (one per cycle).
double measure_clock_ghz() {
  const long iters = 20'000'000;
  double best = 0;
  for (int rep = 0; rep < 10; ++rep) {
    long x = 0;
    double t0 = now();
    for (long t = 0; t < iters; ++t) asm volatile("add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0" : "+r"(x));
    best = std::max(best, iters * 4.0 / (now() - t0) / 1e9);
  }
  return best;
}

// ---- peers -------------------------------------------------------------------

using cblas_sgemm_fn = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int, float,
                                float*, int);
using openblas_set_threads_fn = void (*)(int);
using openblas_corename_fn = char* (*)();
cblas_sgemm_fn cblas_sgemm_p = nullptr;
openblas_set_threads_fn openblas_set_threads = nullptr;

void load_openblas() {
  void* h = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
  if (!h) return;
  cblas_sgemm_p = reinterpret_cast<cblas_sgemm_fn>(dlsym(h, "cblas_sgemm"));
  openblas_set_threads = reinterpret_cast<openblas_set_threads_fn>(dlsym(h, "openblas_set_num_threads"));
  auto core = reinterpret_cast<openblas_corename_fn>(dlsym(h, "openblas_get_corename"));
  std::printf("OpenBLAS core: %s\n", core ? core() : "?");
}

enum class Impl { Ours, Onednn, Openblas, Bf16 };

struct Shape {
  std::string name;
  Trans ta, tb;
  int M, N, K;
  float beta;
  bool per_head;  // one GEMM per thread inside a parallel region
};

struct Buffers {
  std::vector<float> A, B, C;
  std::vector<meshtrain::Bf16> A16, B16;
};

void call(Impl impl, const Shape& s, Buffers& b) {
  int lda = s.ta == Trans::No ? s.K : s.M, ldb = s.tb == Trans::No ? s.N : s.K;
  switch (impl) {
    case Impl::Ours:
      detail::gemm_packed(s.ta, s.tb, s.M, s.N, s.K, 1.0f, b.A.data(), lda, b.B.data(), ldb, s.beta,
                               b.C.data(), s.N);
      break;
    case Impl::Onednn:
      dnnl_sgemm(s.ta == Trans::Yes ? 'T' : 'N', s.tb == Trans::Yes ? 'T' : 'N', s.M, s.N, s.K, 1.0f, b.A.data(),
                 lda, b.B.data(), ldb, s.beta, b.C.data(), s.N);
      break;
    case Impl::Bf16:
      meshtrain::kernels::gemm_bf16(s.ta, s.tb, s.M, s.N, s.K, 1.0f, b.A16.data(), lda, b.B16.data(), ldb, s.beta,
                                    b.C.data(), s.N);
      break;
    case Impl::Openblas:
      // CblasRowMajor = 101, CblasNoTrans = 111, CblasTrans = 112
      cblas_sgemm_p(101, s.ta == Trans::Yes ? 112 : 111, s.tb == Trans::Yes ? 112 : 111, s.M, s.N, s.K, 1.0f,
                    b.A.data(), lda, b.B.data(), ldb, s.beta, b.C.data(), s.N);
      break;
  }
}

// GFLOP/s summed over threads: best of 15 batches of >= 15 ms each. Best,
// not median: other processes share these 2 vCPUs, and the best batch is the
// one least disturbed.
double time_gemm(Impl impl, const Shape& s, int threads) {
  omp_set_num_threads(threads);
  if (openblas_set_threads) openblas_set_threads(s.per_head ? 1 : threads);
  int copies = s.per_head ? threads : 1;
  std::vector<Buffers> bufs(copies);
  for (auto& b : bufs) {
    b.A.assign(size_t(s.M) * s.K, 0.5f);
    b.B.assign(size_t(s.K) * s.N, 0.25f);
    b.C.assign(size_t(s.M) * s.N, 0.0f);
    if (impl == Impl::Bf16) {
      b.A16.assign(b.A.size(), meshtrain::to_bf16(0.5f));
      b.B16.assign(b.B.size(), meshtrain::to_bf16(0.25f));
    }
  }
  auto run = [&](int reps) {
    if (s.per_head) {
#pragma omp parallel num_threads(threads)
      for (int r = 0; r < reps; ++r) call(impl, s, bufs[omp_get_thread_num()]);
    } else {
      for (int r = 0; r < reps; ++r) call(impl, s, bufs[0]);
    }
  };
  run(2);  // warm up: scratch allocation, thread pools, caches
  double flops = 2.0 * s.M * s.N * s.K * copies;
  double t0 = now();
  run(1);
  double one = std::max(now() - t0, 1e-7);
  int reps = std::max(1, int(0.015 / one));
  double best = 0;
  for (int b = 0; b < 15; ++b) {
    t0 = now();
    run(reps);
    best = std::max(best, flops * reps / (now() - t0) / 1e9);
  }
  return best;
}

std::vector<Shape> model_shapes(bool quick) {
  std::vector<Shape> v;
  struct Cfg {
    const char* tag;
    int M, d;
  } cfgs[] = {{"A", 1024, 256}, {"B", 2048, 384}};
  const Trans N = Trans::No, T = Trans::Yes;
  for (auto c : cfgs) {
    int M = c.M, d = c.d, V = 256;
    std::string p = std::string(c.tag) + " ";
    v.push_back({p + "qkv fwd", N, N, M, 3 * d, d, 0, false});
    v.push_back({p + "proj fwd", N, N, M, d, d, 0, false});
    v.push_back({p + "fc1 fwd", N, N, M, 4 * d, d, 0, false});
    v.push_back({p + "fc2 fwd", N, N, M, d, 4 * d, 0, false});
    v.push_back({p + "lm fwd", N, N, M, V, d, 0, false});
    if (quick) continue;
    v.push_back({p + "qkv dX", N, T, M, d, 3 * d, 0, false});
    v.push_back({p + "fc1 dX", N, T, M, d, 4 * d, 0, false});
    v.push_back({p + "fc2 dX", N, T, M, 4 * d, d, 0, false});
    v.push_back({p + "qkv dW", T, N, d, 3 * d, M, 1, false});
    v.push_back({p + "fc1 dW", T, N, d, 4 * d, M, 1, false});
    v.push_back({p + "fc2 dW", T, N, 4 * d, d, M, 1, false});
    v.push_back({p + "proj dW", T, N, d, d, M, 1, false});
  }
  for (int ctx : {128, 256}) {
    std::string p = "head ctx" + std::to_string(ctx) + " ";
    v.push_back({p + "QK^T", N, T, ctx, ctx, 64, 0, true});
    v.push_back({p + "PV", N, N, ctx, 64, ctx, 0, true});
    v.push_back({p + "dV=P^T dO", T, N, ctx, 64, ctx, 0, true});
  }
  v.push_back({"square 2048", N, N, 2048, 2048, 2048, 0, false});
  return v;
}

const char* tname(Trans a, Trans b) {
  return a == Trans::No ? (b == Trans::No ? "NN" : "NT") : (b == Trans::No ? "TN" : "TT");
}

// Sweeps the cache blocking on one thread (the 2-thread split only divides
// M or N, so the per-thread blocking is what matters).
void sweep() {
  const Trans N = Trans::No;
  std::vector<Shape> shapes = {{"B qkv", N, N, 2048, 1152, 384, 0, false},
                               {"B fc2", N, N, 2048, 384, 1536, 0, false},
                               {"A fc1", N, N, 1024, 1024, 256, 0, false},
                               {"sq2048", N, N, 2048, 2048, 2048, 0, false}};
  std::printf("onednn:          ");
  for (auto& s : shapes) std::printf("  %s %6.1f", s.name.c_str(), time_gemm(Impl::Onednn, s, 1));
  std::printf("\n");
  for (int kc : {256, 384, 512})
    for (int mc : {14 * 37, 14 * 147})
      for (int nc : {32 * 8, 32 * 12, 32 * 16, 32 * 24}) {
        detail::set_gemm_blocking({mc, kc, nc});
        std::printf("mc=%3d kc=%3d nc=%4d", mc, kc, nc);
        for (auto& s : shapes) std::printf("  %s %6.1f", s.name.c_str(), time_gemm(Impl::Ours, s, 1));
        std::printf("\n");
        std::fflush(stdout);
      }
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false, do_sweep = false, peak_only = false, bf16_peak_only = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick")) quick = true;
    if (!std::strcmp(argv[i], "--peak")) peak_only = true;
    if (!std::strcmp(argv[i], "--sweep")) do_sweep = true;
    if (!std::strcmp(argv[i], "--cpu-clock")) g_cpu_clock = true;
    if (!std::strcmp(argv[i], "--bf16-peak")) bf16_peak_only = true;
  }
  const Shape square{"square 2048", Trans::No, Trans::No, 2048, 2048, 2048, 0, false};
  auto print_bf16_peak = [&] {
    std::printf("bf16 peak (gemm_bf16, square 2048): 1 thread %.1f GFLOP/s, 2 threads %.1f\n",
                time_gemm(Impl::Bf16, square, 1), time_gemm(Impl::Bf16, square, 2));
  };
  if (bf16_peak_only) {
    print_bf16_peak();
    return 0;
  }
  std::printf("kernels::gemm backend: %s, bf16: %s, OMP max threads %d\n", meshtrain::kernels::gemm_backend_name(),
              meshtrain::kernels::gemm_bf16_backend_name(), omp_get_max_threads());
  if (do_sweep) {
    sweep();
    return 0;
  }
  double ghz = measure_clock_ghz();
  double peak[3] = {0, measure_peak(1), measure_peak(2)};
  std::printf("clock ~%.2f GHz; FMA peak (%d %s chains): 1 thread %.1f GFLOP/s (%.1f flop/cycle), 2 threads %.1f\n",
              ghz, kChains, has_avx512() ? "zmm" : "ymm", peak[1], peak[1] / ghz, peak[2]);
  // --peak: the machine's FMA peak only (the GEMM table needs AVX-512 for
  // meshtrain's packed kernel).
  if (peak_only || !has_avx512()) return 0;
  load_openblas();
  // The two vCPUs are separate cores, so the 2-thread peak is at least twice
  // the 1-thread one; a lower measurement means another job held a core.
  peak[2] = std::max(peak[2], 2 * peak[1]);
  std::printf("%% peak uses %.1f (1 thread) and %.1f (2 threads)\n", peak[1], peak[2]);
  print_bf16_peak();
  std::printf("\n| shape | op | M x N x K | thr | ours | onednn | openblas | ours %% peak | ours / onednn | bf16 | bf16 / onednn |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const Shape& s : model_shapes(quick)) {
    for (int t : {1, 2}) {
      double g[4];
      for (Impl impl : {Impl::Ours, Impl::Onednn, Impl::Openblas, Impl::Bf16})
        g[int(impl)] = (impl == Impl::Openblas && !cblas_sgemm_p) ? 0 : time_gemm(impl, s, t);
      std::printf("| %s | %s | %dx%dx%d | %d | %.1f | %.1f | %.1f | %.0f%% | %.2f | %.1f | %.2f |\n", s.name.c_str(),
                  tname(s.ta, s.tb), s.M, s.N, s.K, t, g[0], g[1], g[2], 100 * g[0] / peak[t], g[0] / g[1], g[3],
                  g[3] / g[1]);
      std::fflush(stdout);
    }
  }
  return 0;
}
