#include "meshtrain/cli/machine_profile.hpp"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <vector>

#include "meshtrain/cli/self_executable.hpp"
#include "meshtrain/core/aligned_buffer.hpp"
#include "meshtrain/core/error.hpp"
#include "meshtrain/core/statistics.hpp"
#include "meshtrain/core/threads.hpp"
#include "meshtrain/kernels/gemm.hpp"

namespace meshtrain::cli {
namespace {

double host_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? double(pages) * double(page) : 0;
}

// Best of several 512^3 fp32 GEMMs on one thread (the shape of a mid-sized
// layer; the buffers are touched before timing).
double single_core_gemm_flops() {
  constexpr int n = 512;
  std::vector<float> a(size_t(n) * n, 0.5f), b(size_t(n) * n, 0.25f), c(size_t(n) * n, 0.0f);
  const int threads = omp_get_max_threads();
  use_threads(threads_for(1, 1));
  double best = 1e30;
  for (int i = 0; i < 6; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    kernels::gemm(kernels::Trans::No, kernels::Trans::No, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  use_threads(threads);
  return 2.0 * n * n * n / best;
}

std::vector<LinkSample> run_all_reduce_bench(const std::string& transport) {
  const std::string command = self_executable() + " bench collectives --nproc 2 --transport " + transport +
                              " --algo ring --sizes 4K:16M --iters 10 --json 2>/dev/null";
  std::FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) throw Error("plan --measure: cannot start the collective benchmark");
  std::vector<LinkSample> points;
  char line[1024];
  while (std::fgets(line, sizeof line, pipe)) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.contains("bytes") && j.contains("time_us"))
      points.push_back({j["bytes"].get<double>(), j["time_us"].get<double>() * 1e-6});
  }
  const int status = ::pclose(pipe);
  if (status != 0 || points.size() < 2)
    throw Error("plan --measure: the " + transport + " all-reduce benchmark failed (run `meshtrain bench collectives "
                "--nproc 2 --transport " + transport + "` to see why)");
  return points;
}

}  // namespace

// Not a least-squares line through every size: spanning 4 KiB to 16 MiB,
// its intercept is set by the largest sizes' noise (one slow 8 MiB call
// made alpha ~0.5 ms, which ZeRO-3's per-unit gathers multiply into tens of
// milliseconds). Alpha comes from the smallest sizes, beta from the
// largest, each the median of three so that one outlier cannot move it.
LinkFit fit_ring_of_two(std::vector<LinkSample> samples) {
  if (samples.size() < 2) throw Error("plan --measure: a link fit needs at least two message sizes");
  std::sort(samples.begin(), samples.end(), [](const LinkSample& a, const LinkSample& b) { return a.bytes < b.bytes; });
  const size_t k = std::min<size_t>(3, samples.size() / 2);
  std::vector<double> alphas, betas;
  for (size_t i = 0; i < k; ++i) alphas.push_back(samples[i].seconds / 2);
  LinkFit fit;
  fit.alpha_s = median(alphas);
  // At least half of a large message's time is bandwidth, whatever alpha says.
  for (size_t i = samples.size() - k; i < samples.size(); ++i)
    betas.push_back(std::max(samples[i].seconds - 2 * fit.alpha_s, samples[i].seconds / 2) / samples[i].bytes);
  fit.beta_s_per_byte = median(betas);
  return fit;
}

comm::CostTable MachineProfile::links() const {
  return comm::CostTable::on_one_link(shm_alpha_s, shm_beta_s_per_byte);
}

MachineProfile measure_machine(std::FILE* log) {
  MachineProfile p;
  p.cores = this_host_cpu().cores;
  p.memory_bytes = host_memory_bytes();
  if (log) std::fprintf(log, "measuring: single-core GEMM...\n");
  p.gemm_flops = single_core_gemm_flops();
  if (log) std::fprintf(log, "measuring: shared-memory all-reduce over 2 ranks, 4 KiB to 16 MiB...\n");
  const LinkFit link = fit_ring_of_two(run_all_reduce_bench("shm"));
  p.shm_alpha_s = link.alpha_s;
  p.shm_beta_s_per_byte = link.beta_s_per_byte;
  if (log)
    std::fprintf(log, "measured: %d cores, %.1f GB memory, %.1f GFLOP/s per core (fp32 GEMM), shared memory %.1f us "
                      "+ %.2f GB/s\n",
                 p.cores, p.memory_bytes / 1e9, p.gemm_flops / 1e9, p.shm_alpha_s * 1e6, 1e-9 / p.shm_beta_s_per_byte);
  return p;
}

comm::CostTable measure_link(comm::TransportKind transport, std::FILE* log) {
  if (transport == comm::TransportKind::Shm) return measure_machine(log).links();
  const std::string name = enum_string(transport);
  if (log) std::fprintf(log, "measuring: %s all-reduce over 2 ranks, 4 KiB to 16 MiB...\n", name.c_str());
  const LinkFit link = fit_ring_of_two(run_all_reduce_bench(name));
  if (log)
    std::fprintf(log, "measured: %s %.1f us + %.2f GB/s\n", name.c_str(), link.alpha_s * 1e6,
                 1e-9 / link.beta_s_per_byte);
  return comm::CostTable::on_one_link(link.alpha_s, link.beta_s_per_byte);
}

void add_machine_profile(const MachineProfile& p, plan::PlanValues& values) {
  auto put = [&](const char* key, double value) {
    char text[64];
    std::snprintf(text, sizeof text, "%.6g", value);
    values[key] = {text, "plan --measure"};
  };
  values["hardware.device"] = {"custom", "plan --measure"};
  values["training.precision"] = {"fp32", "plan --measure"};
  put("hardware.devices_per_node", p.cores);
  put("hardware.memory_gb", p.memory_bytes / p.cores / 1e9);
  put("hardware.tflops", p.gemm_flops / 1e12);
  put("hardware.intra_gb_per_s", 1e-9 / p.shm_beta_s_per_byte);
  put("hardware.intra_latency_us", p.shm_alpha_s * 1e6);
}

}  // namespace meshtrain::cli
