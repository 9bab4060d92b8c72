// gemm_rate: this GPU's bf16 GEMM rate through cuBLASLt, as meshtrain's
// layers run it (kernels/cuda/matmul.hpp: bf16 operands, fp32 sums, bf16
// outputs, the heuristic's first algorithm kept per shape), in TFLOP/s:
//   - the 8192^3 square, the practical ceiling of the card (about 80% of
//     the 989 TFLOP/s dense bf16 peak of an H100 SXM / H200);
//   - GPT-2 124M's linear layers at B*T = 16384 rows (batch 16 x 1024), each
//     in the three products of a training step: forward, backward_input,
//     backward_weight (accumulating, as gradients do); and their sum over a
//     step (12 layers x 4 linears + the classifier over the padded
//     vocabulary 50304), the time the linear layers alone take per step.
// Timing: cudaEvents around a batch of calls (at least ~10 ms), the best of
// `reps` batches after warm-up; FLOPs = 2 M N K per product.
//
// Prints the GPU on stderr and one JSON object on stdout. Where there is no
// usable GPU: the probe's reason on stderr, exit status 3; other errors 1.
// Usage: gemm_rate [--device N] [--reps N] [--quick]
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "meshtrain/core/bf16.hpp"
#include "meshtrain/core/device.hpp"
#include "meshtrain/core/device_buffer.hpp"
#include "meshtrain/core/error.hpp"
#include "meshtrain/kernels/cuda/cuda_check.hpp"
#include "meshtrain/kernels/cuda/cuda_memory.hpp"
#include "meshtrain/kernels/cuda/matmul.hpp"
#include "meshtrain/kernels/device_probe.hpp"

namespace {

using meshtrain::Bf16;
using meshtrain::DeviceBuffer;
using meshtrain::MemoryKind;
using meshtrain::kernels::cuda::CublasLtContext;
using meshtrain::kernels::cuda::CudaAllocator;
using meshtrain::kernels::cuda::MatmulShape;

struct Options {
  int device = 0;
  int reps = 5;
  int warmup = 3;
};

// A bf16 buffer of n values uniform in [-1, 1): one random chunk uploaded,
// then doubled on the device (copies of what is already there).
DeviceBuffer<Bf16> random_bf16(CudaAllocator& alloc, size_t n, uint64_t seed) {
  DeviceBuffer<Bf16> buffer(alloc, n, MemoryKind::Other);
  const size_t chunk = std::min<size_t>(n, size_t(1) << 20);
  std::vector<Bf16> host(chunk);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (Bf16& x : host) x = meshtrain::to_bf16(dist(rng));
  buffer.upload(host);
  Bf16* base = buffer.ptr().raw();  // for the copy calls only
  for (size_t filled = chunk; filled < n;) {
    const size_t count = std::min(filled, n - filled);
    MESHTRAIN_CUDA_CHECK(cudaMemcpyAsync(base + filled, base, count * sizeof(Bf16), cudaMemcpyDeviceToDevice,
                                         alloc.stream()));
    filled += count;
  }
  MESHTRAIN_CUDA_CHECK(cudaStreamSynchronize(alloc.stream()));
  return buffer;
}

struct Events {
  cudaEvent_t start = nullptr, stop = nullptr;
  Events() {
    MESHTRAIN_CUDA_CHECK(cudaEventCreate(&start));
    MESHTRAIN_CUDA_CHECK(cudaEventCreate(&stop));
  }
  ~Events() {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
  Events(const Events&) = delete;
  Events& operator=(const Events&) = delete;
};

// Milliseconds per call: the best of opt.reps batches after opt.warmup calls.
double best_ms(cudaStream_t stream, const Options& opt, const std::function<void()>& call) {
  for (int i = 0; i < opt.warmup; ++i) call();
  Events ev;
  // One timed call sizes the batch: at least ~10 ms of work per measurement.
  MESHTRAIN_CUDA_CHECK(cudaEventRecord(ev.start, stream));
  call();
  MESHTRAIN_CUDA_CHECK(cudaEventRecord(ev.stop, stream));
  MESHTRAIN_CUDA_CHECK(cudaEventSynchronize(ev.stop));
  float one = 0.0f;
  MESHTRAIN_CUDA_CHECK(cudaEventElapsedTime(&one, ev.start, ev.stop));
  const int batch = std::clamp(int(std::ceil(10.0 / std::max(one, 1e-3f))), 1, 500);
  double best = 1e30;
  for (int r = 0; r < opt.reps; ++r) {
    MESHTRAIN_CUDA_CHECK(cudaEventRecord(ev.start, stream));
    for (int i = 0; i < batch; ++i) call();
    MESHTRAIN_CUDA_CHECK(cudaEventRecord(ev.stop, stream));
    MESHTRAIN_CUDA_CHECK(cudaEventSynchronize(ev.stop));
    float ms = 0.0f;
    MESHTRAIN_CUDA_CHECK(cudaEventElapsedTime(&ms, ev.start, ev.stop));
    best = std::min(best, double(ms) / batch);
  }
  return best;
}

double tflops(MatmulShape s, double ms) { return 2.0 * s.M * s.N * double(s.K) / (ms * 1e-3) / 1e12; }

// The three products of one linear layer: inp (M, K), weight (N, K), out (M, N).
struct LayerTimes {
  double forward_ms, backward_input_ms, backward_weight_ms;
};

LayerTimes time_layer(CudaAllocator& alloc, CublasLtContext& ctx, MatmulShape s, const Options& opt) {
  const size_t mk = size_t(s.M) * s.K, nk = size_t(s.N) * s.K, mn = size_t(s.M) * s.N;
  DeviceBuffer<Bf16> inp = random_bf16(alloc, mk, 1);
  DeviceBuffer<Bf16> weight = random_bf16(alloc, nk, 2);
  DeviceBuffer<Bf16> dout = random_bf16(alloc, mn, 3);
  DeviceBuffer<Bf16> out(alloc, mn, MemoryKind::Other);
  DeviceBuffer<Bf16> dinp(alloc, mk, MemoryKind::Other);
  DeviceBuffer<Bf16> dweight(alloc, nk, MemoryKind::Other);
  dweight.zero();
  LayerTimes t{};
  t.forward_ms = best_ms(ctx.stream(), opt, [&] { ctx.forward(out.ptr(), inp.ptr(), weight.ptr(), s); });
  t.backward_input_ms =
      best_ms(ctx.stream(), opt, [&] { ctx.backward_input(dinp.ptr(), dout.ptr(), weight.ptr(), s); });
  t.backward_weight_ms = best_ms(ctx.stream(), opt, [&] {
    ctx.backward_weight(dweight.ptr(), dout.ptr(), inp.ptr(), s, /*accumulate=*/true);
  });
  MESHTRAIN_CUDA_CHECK(cudaStreamSynchronize(ctx.stream()));
  return t;
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out + "\"";
}

int run(const Options& opt) {
  meshtrain::kernels::CudaDeviceInfo info;
  try {
    info = meshtrain::kernels::open_cuda_device(meshtrain::Device{meshtrain::DeviceKind::Cuda, opt.device});
  } catch (const meshtrain::DeviceError& e) {  // no usable GPU: say why, status 3
    std::fprintf(stderr, "gemm_rate: %s\n", e.what());
    return meshtrain::kExitBadInput;
  }
  const std::string gpu = meshtrain::kernels::describe(info);
  std::fprintf(stderr, "gemm_rate: %s\n", gpu.c_str());

  CudaAllocator alloc;
  CublasLtContext ctx(alloc);

  const MatmulShape square{8192, 8192, 8192};
  std::fprintf(stderr, "gemm_rate: 8192^3 ...\n");
  LayerTimes sq = time_layer(alloc, ctx, square, opt);

  struct Layer {
    const char* name;
    int count;  // per step
    int K, N;
  };
  constexpr int kRows = 16 * 1024;  // B * T
  const Layer layers[] = {{"attn.qkv", 12, 768, 2304},
                          {"attn.proj", 12, 768, 768},
                          {"mlp.fc", 12, 768, 3072},
                          {"mlp.proj", 12, 3072, 768},
                          {"lm_head", 1, 768, 50304}};
  std::string layer_json;
  double step_ms = 0.0, step_flop = 0.0;
  for (const Layer& l : layers) {
    const MatmulShape s{kRows, l.N, l.K};
    std::fprintf(stderr, "gemm_rate: %s M=%d N=%d K=%d ...\n", l.name, s.M, s.N, s.K);
    const LayerTimes t = time_layer(alloc, ctx, s, opt);
    step_ms += l.count * (t.forward_ms + t.backward_input_ms + t.backward_weight_ms);
    step_flop += l.count * 3 * 2.0 * s.M * s.N * double(s.K);
    char line[512];
    std::snprintf(line, sizeof line,
                  "%s{\"layer\": \"%s\", \"per_step\": %d, \"m\": %d, \"n\": %d, \"k\": %d, "
                  "\"forward_tflops\": %.1f, \"backward_input_tflops\": %.1f, \"backward_weight_tflops\": %.1f}",
                  layer_json.empty() ? "" : ", ", l.name, l.count, s.M, s.N, s.K, tflops(s, t.forward_ms),
                  tflops(s, t.backward_input_ms), tflops(s, t.backward_weight_ms));
    layer_json += line;
  }

  char head[1024];
  std::snprintf(head, sizeof head,
                "{\"bench\": \"gemm_rate\", \"gpu\": %s, \"name\": %s, \"sm\": \"%d%d\", \"sms\": %d, "
                "\"driver\": \"%d.%d\", \"runtime\": \"%d.%d\", \"cublaslt\": %zu, "
                "\"types\": \"bf16 operands, fp32 compute, bf16 output\", \"peak_dense_bf16_tflops\": 989, ",
                json_string(gpu).c_str(), json_string(info.name).c_str(), info.major, info.minor,
                info.multiprocessors, info.driver_version / 1000, info.driver_version % 1000 / 10,
                info.runtime_version / 1000, info.runtime_version % 1000 / 10, cublasLtGetVersion());
  std::printf("%s\"square_8192\": {\"forward_tflops\": %.1f, \"backward_input_tflops\": %.1f, "
              "\"backward_weight_tflops\": %.1f}, \"gpt2_124m\": {\"rows\": %d, \"layers\": [%s], "
              "\"step_linear_ms\": %.3f, \"step_linear_tflops\": %.1f}}\n",
              head, tflops(square, sq.forward_ms), tflops(square, sq.backward_input_ms),
              tflops(square, sq.backward_weight_ms), kRows, layer_json.c_str(), step_ms,
              step_flop / (step_ms * 1e-3) / 1e12);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") {
      opt.reps = 2;
      opt.warmup = 1;
    } else if (a == "--device" && i + 1 < argc) {
      opt.device = std::max(0, std::atoi(argv[++i]));
    } else if (a == "--reps" && i + 1 < argc) {
      opt.reps = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: gemm_rate [--device N] [--reps N] [--quick]\n");
      return 2;
    }
  }
  try {
    return run(opt);
  } catch (const std::exception& e) {  // a CUDA or cuBLASLt failure after the probe
    std::fprintf(stderr, "gemm_rate: error: %s\n", e.what());
    return 1;
  }
}
