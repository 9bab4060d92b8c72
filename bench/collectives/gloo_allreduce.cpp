// Peer: Gloo's own all-reduce algorithms (Debian's libgloo-dev, 2022) over
// its TCP transport on loopback, with a file store for rendezvous: ring,
// ring_chunked, halving_doubling and bcube, fp32 sum in place, timed as
// meshtrain's bench collectives times itself. Forks --nproc ranks itself.
//   bench_gloo_allreduce --nproc 2 --sizes 4K:256M
// Each algorithm object is built once per size before timing (Gloo's
// algorithms allocate their scratch buffers in the constructor); the user
// buffer is allocated and touched once at the largest size.
#include <sys/wait.h>
#include <unistd.h>

#include <gloo/allreduce_bcube.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <functional>
#include <memory>
#include <vector>

#include "peer_args.hpp"

namespace {

namespace mb = meshtrain::comm::bench;
using Context = std::shared_ptr<gloo::Context>;
using MakeAlgorithm = std::function<std::unique_ptr<gloo::Algorithm>(const Context&, float*, int)>;

template <class A>
MakeAlgorithm make() {
  return [](const Context& c, float* data, int count) { return std::make_unique<A>(c, std::vector<float*>{data}, count); };
}

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Returns 0 when every check passed.
int run_rank(int rank, const peer::Args& args, const std::string& store_dir) {
  const int n = args.nproc;
  auto device = gloo::transport::tcp::CreateDevice("127.0.0.1");
  gloo::rendezvous::FileStore store(store_dir);
  auto rendezvous = std::make_shared<gloo::rendezvous::Context>(rank, n);
  rendezvous->connectFullMesh(store, device);
  const Context context = rendezvous;

  const std::vector<std::pair<const char*, MakeAlgorithm>> algorithms = {
      {"ring", make<gloo::AllreduceRing<float>>()},
      {"ring_chunked", make<gloo::AllreduceRingChunked<float>>()},
      {"halving_doubling", make<gloo::AllreduceHalvingDoubling<float>>()},
      {"bcube", make<gloo::AllreduceBcube<float>>()},
  };
  const size_t largest = *std::max_element(args.sizes.begin(), args.sizes.end());
  std::vector<float> buffer(largest / sizeof(float), 0.0f);  // allocated and touched once
  int status = 0;
  for (const auto& [name, make_algorithm] : algorithms) {
    for (size_t bytes : args.sizes) {
      const int count = int(bytes / sizeof(float));
      auto algorithm = make_algorithm(context, buffer.data(), count);
      if (args.check) {
        for (int i = 0; i < count; ++i) buffer[size_t(i)] = peer::check_input(rank, size_t(i));
        algorithm->run();
        for (int i = 0; i < count && status == 0; ++i)
          if (buffer[size_t(i)] != peer::check_sum(n, size_t(i))) {
            std::fprintf(stderr, "gloo %s rank %d: check failed at %zu bytes, element %d\n", name, rank, bytes, i);
            status = 1;
          }
        std::fill(buffer.begin(), buffer.begin() + count, 0.0f);
      }
      for (int i = 0; i < mb::warmup_iterations(bytes, args.iters); ++i) algorithm->run();
      std::vector<double> seconds(size_t(mb::timed_iterations(bytes, args.iters)));
      for (double& s : seconds) {
        const double start = now_s();
        algorithm->run();
        s = now_s() - start;
      }
      gloo::AllreduceRing<double>(context, {seconds.data()}, int(seconds.size()), gloo::ReductionFunction<double>::max)
          .run();
      if (rank != 0) continue;
      mb::BenchResult r;
      r.algo = name;
      r.transport = "gloo_tcp";
      r.nproc = n;
      r.bytes = bytes;
      mb::finish_all_reduce(r, seconds);
      std::printf("%s\n", mb::to_json(r).c_str());
      std::fflush(stdout);
    }
  }
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  const peer::Args args = peer::parse_args(argc, argv);
  char dir_template[] = "/tmp/gloo-bench-XXXXXX";
  const char* dir = ::mkdtemp(dir_template);
  if (!dir) {
    std::perror("mkdtemp");
    return 1;
  }
  std::fflush(nullptr);
  std::vector<pid_t> children;
  for (int rank = 0; rank < args.nproc; ++rank) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      int status = 2;
      try {
        status = run_rank(rank, args, dir);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "gloo rank %d: %s\n", rank, e.what());
      }
      std::fflush(nullptr);
      ::_exit(status);
    }
    children.push_back(pid);
  }
  int failed = 0;
  for (pid_t pid : children) {
    int st = 0;
    ::waitpid(pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) failed = 1;
  }
  std::filesystem::remove_all(dir);
  return failed;
}
