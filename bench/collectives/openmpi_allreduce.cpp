// Peer: OpenMPI's MPI_Allreduce (fp32 sum, in place), timed as meshtrain's
// bench collectives times itself. Run under mpirun; for OpenMPI's best
// figures set MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=17179869184 (its
// large internal buffers otherwise come fresh from mmap on every call, and
// page faults cost ~12 us per page here; see /work/shared/PEERS.md).
//   mpirun --allow-run-as-root --oversubscribe -np 2 bench_openmpi_allreduce --sizes 4K:256M
// The C API only: without these, mpi.h drags in the deprecated C++ bindings
// (and a link dependency on libmpi_cxx).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "peer_args.hpp"

namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const peer::Args args = peer::parse_args(argc, argv);
  int rank = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  using meshtrain::comm::bench::BenchResult;
  namespace mb = meshtrain::comm::bench;

  const size_t largest = *std::max_element(args.sizes.begin(), args.sizes.end());
  std::vector<float> buffer(largest / sizeof(float), 0.0f);  // allocated and touched once
  int status = 0;
  for (size_t bytes : args.sizes) {
    const int count = int(bytes / sizeof(float));
    MPI_Barrier(MPI_COMM_WORLD);
    if (args.check) {
      for (int i = 0; i < count; ++i) buffer[size_t(i)] = peer::check_input(rank, size_t(i));
      MPI_Allreduce(MPI_IN_PLACE, buffer.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      for (int i = 0; i < count && status == 0; ++i)
        if (buffer[size_t(i)] != peer::check_sum(n, size_t(i))) {
          std::fprintf(stderr, "rank %d: check failed at %d bytes, element %d\n", rank, int(bytes), i);
          status = 1;
        }
      std::fill(buffer.begin(), buffer.begin() + count, 0.0f);
    }
    for (int i = 0; i < mb::warmup_iterations(bytes, args.iters); ++i)
      MPI_Allreduce(MPI_IN_PLACE, buffer.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    std::vector<double> seconds(size_t(mb::timed_iterations(bytes, args.iters)));
    for (double& s : seconds) {
      const double start = now_s();
      MPI_Allreduce(MPI_IN_PLACE, buffer.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      s = now_s() - start;
    }
    MPI_Allreduce(MPI_IN_PLACE, seconds.data(), int(seconds.size()), MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (rank != 0) continue;
    BenchResult r;
    r.algo = "MPI_Allreduce";
    r.transport = "openmpi";
    r.nproc = n;
    r.bytes = bytes;
    mb::finish_all_reduce(r, seconds);
    std::printf("%s\n", mb::to_json(r).c_str());
    std::fflush(stdout);
  }
  MPI_Allreduce(MPI_IN_PLACE, &status, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return status;
}
