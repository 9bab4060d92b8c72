#pragma once
// Test harness for the collectives: worlds of ranks as communicators in one
// process, built by a transport factory, and serial references.
//
// Each test world submits the same collective on every rank's process group
// from the test thread (the _async forms), then waits on all handles: the
// communicators' threads are the ranks, as Gloo's tests use threads.
//
// To run the whole matrix over another transport, add one line to
// transport_factories() that builds `world_size` connected transports. shm
// and tcp run the full matrix (world sizes 1-8, every count): the whole of
// unit_comm takes ~25 s on 2 vCPUs, so no subset is needed.
//
// MPI ranks are processes, not threads: started by mpirun
// (tests/unit/comm/mpi_matrix.sh), every process runs the same tests in the
// same order, its world holds only its own rank's transport (the other
// ranks' slots are placeholders: World::local() says which is real), and
// the checks look at the local rank only against the same serial reference.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <thread>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "meshtrain/comm/collectives/collectives.hpp"
#include "meshtrain/comm/group/communicator.hpp"
#include "meshtrain/comm/group/process_group.hpp"
#include "meshtrain/comm/rendezvous/store_server.hpp"
#include "meshtrain/comm/transport/inproc/inproc_transport.hpp"
#include "meshtrain/comm/transport/shm/shm_transport.hpp"
#include "meshtrain/comm/transport/tcp/tcp_transport.hpp"
#ifdef MESHTRAIN_HAVE_MPI
#include "meshtrain/comm/transport/mpi/mpi_transport.hpp"
#endif
#include "thread_ranks.hpp"

namespace meshtrain::comm::testing {

using namespace std::chrono_literals;

struct TransportFactory {
  std::string name;
  // The transports of one world: result[r].rank() == r. A factory whose
  // transports connect concurrently (tcp) starts its own threads.
  std::function<std::vector<std::unique_ptr<Transport>>(int world_size, std::chrono::milliseconds timeout)> make;
};
inline void PrintTo(const TransportFactory& f, std::ostream* os) { *os << f.name; }

// Runs connect(rank) for every rank on its own thread (shm and tcp block in
// connect until all ranks have joined) and collects the transports.
inline std::vector<std::unique_ptr<Transport>> connect_concurrently(
    int n, const std::function<std::unique_ptr<Transport>(int rank)>& connect) {
  std::vector<std::unique_ptr<Transport>> transports(static_cast<size_t>(n));
  meshtrain::testing::on_every_rank(n, [&](int r) { transports[size_t(r)] = connect(r); });
  return transports;
}

inline std::string unique_test_job(const char* kind) {
  static std::atomic<int> counter{0};
  return std::string("matrix-") + kind + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
}

inline std::unique_ptr<Transport> connect_shm_rank(const std::string& job, int rank, int n,
                                                   std::chrono::milliseconds timeout, size_t single_copy_bytes = 0) {
  ShmOptions o;
  o.job_id = job;
  o.token = "matrix-token-0123456789abcdef";
  o.rank = rank;
  o.world_size = n;
  o.transport.timeout = timeout;
  o.slot_bytes = 16 << 10;  // small rings, so senders wait for room as with inproc
  o.slot_count = 4;
  o.single_copy_bytes = o.single_copy_bytes_shared_cores = single_copy_bytes;  // 0: slots only
  return connect_shm(o);
}

// shm with every message single-copy (where the kernel allows; the slots
// otherwise): an instantiation of its own at a few world sizes.
inline TransportFactory shm_single_copy_factory() {
  return {"shm_single_copy", [](int n, std::chrono::milliseconds timeout) {
            const std::string job = unique_test_job("shm1copy");
            return connect_concurrently(n, [&](int rank) { return connect_shm_rank(job, rank, n, timeout, 1); });
          }};
}

inline std::vector<std::unique_ptr<Transport>> make_tcp_transports(int n, std::chrono::milliseconds timeout) {
  const std::string job = unique_test_job("tcp"), token = "matrix-token-0123456789abcdef";
  rendezvous::TcpStore store({"127.0.0.1", 0, token, job, n, {}});  // needed only while connecting
  return connect_concurrently(n, [&](int rank) {
    TcpOptions o;
    o.rank = rank;
    o.world_size = n;
    o.master_port = store.port();
    o.token = token;
    o.job_id = job;
    o.host_store = false;
    o.connect_timeout = std::chrono::milliseconds(10000);
    o.transport.timeout = timeout;
    return connect_tcp(o);
  });
}

// Under mpirun: this process's rank and the world's size (0 otherwise).
inline int mpirun_env(const char* name) {
  const char* value = std::getenv(name);
  return value ? std::atoi(value) : -1;
}
inline bool under_mpirun() { return mpirun_env("OMPI_COMM_WORLD_SIZE") > 0; }

#ifdef MESHTRAIN_HAVE_MPI
// Only this process's rank is real; a world of another size than mpirun's
// is empty (its tests skip).
inline std::vector<std::unique_ptr<Transport>> make_mpi_transports(int n, std::chrono::milliseconds timeout) {
  const int rank = mpirun_env("OMPI_COMM_WORLD_RANK"), size = mpirun_env("OMPI_COMM_WORLD_SIZE");
  if (n != size) return {};
  std::vector<std::unique_ptr<Transport>> transports(static_cast<size_t>(n));
  transports[size_t(rank)] = connect_mpi({.expected_rank = rank, .expected_world_size = n, .transport = {timeout}});
  return transports;
}
#endif

inline std::vector<TransportFactory> transport_factories() {
#ifdef MESHTRAIN_HAVE_MPI
  if (under_mpirun()) return {{"mpi", make_mpi_transports}};
#endif
  return {
      {"inproc",
       [](int n, std::chrono::milliseconds timeout) {
         InprocOptions options;
         options.transport.timeout = timeout;
         options.queue_capacity_bytes = 64 << 10;  // small, so senders do wait for room
         return make_inproc_transports(n, options);
       }},
      {"shm",
       [](int n, std::chrono::milliseconds timeout) {
         const std::string job = unique_test_job("shm");
         return connect_concurrently(n, [&](int rank) { return connect_shm_rank(job, rank, n, timeout); });
       }},
      {"tcp", make_tcp_transports},
  };
}

// Small chunks, so counts in the thousands already pipeline over several.
inline CollectiveOptions test_options() {
  CollectiveOptions options;
  options.chunk_bytes = 8 << 10;
  options.costs.tree_chunk_bytes = 2 << 10;
  return options;
}

struct World {
  World(const TransportFactory& factory, int n, std::chrono::milliseconds timeout = 20s,
        CollectiveOptions options = test_options()) {
    for (auto& t : factory.make(n, timeout)) {
      is_local.push_back(t != nullptr);
      // A rank of another process (mpi): a placeholder group of one, never
      // used, so that groups[r] still indexes by rank.
      if (!t) t = std::move(make_inproc_transports(1, {}).front());
      comms.push_back(std::make_shared<Communicator>(std::move(t), options));
    }
    for (auto& c : comms) groups.emplace_back(c);
  }
  // 0 when the factory has no world of this size (mpi: not mpirun's size).
  int size() const { return int(comms.size()); }
  bool local(int rank) const { return is_local[size_t(rank)]; }
  // The lowest rank this process holds.
  int first_local() const { return int(std::find(is_local.begin(), is_local.end(), true) - is_local.begin()); }
  // Runs submit(rank) on every local rank and waits for all handles.
  void run(const std::function<WorkHandle(int rank)>& submit) {
    std::vector<WorkHandle> works;
    for (int r = 0; r < size(); ++r)
      if (local(r)) works.push_back(submit(r));
    for (auto& w : works) w->wait();
  }
  std::vector<std::shared_ptr<Communicator>> comms;
  std::vector<ProcessGroup> groups;
  std::vector<bool> is_local;
};

// Deterministic inputs; floats are sevenths, so sums round and the order of
// addition shows in the bits.
template <class T>
T input_value(int rank, size_t i, int salt = 0) {
  uint64_t h = (uint64_t(rank) + 1) * 0x9E3779B97F4A7C15ull ^ (uint64_t(i) + uint64_t(salt) * 977) * 0xBF58476D1CE4E5B9ull;
  h ^= h >> 29;
  const int v = int(h % 2001) - 1000;
  if constexpr (std::is_floating_point_v<T>) return T(v) / T(7);
  else return T(v);
}

template <class T>
std::vector<std::vector<T>> make_inputs(int n, size_t count, int salt = 0) {
  std::vector<std::vector<T>> x(static_cast<size_t>(n), std::vector<T>(count));
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < count; ++i) x[size_t(r)][i] = input_value<T>(r, i, salt);
  return x;
}

// op(local, incoming), as reduce_into computes it.
template <class T>
T combine(ReduceKind op, T local, T incoming) {
  switch (op) {
    case ReduceKind::Sum:
    case ReduceKind::Avg: return local + incoming;
    case ReduceKind::Max: return std::max(local, incoming);
    case ReduceKind::Min: return std::min(local, incoming);
  }
  return local;
}
template <class T>
T finish(ReduceKind op, T value, int n) {
  return op == ReduceKind::Avg && n > 1 ? T(value / T(n)) : value;
}

// Ring order for element i of segment k: acc = x[k+1]; acc = op(x[k+2], acc) ... op(x[k], acc).
template <class T>
T ring_reference(const std::vector<std::vector<T>>& x, int k, size_t i, ReduceKind op) {
  const int n = int(x.size());
  T acc = x[size_t((k + 1) % n)][i];
  for (int j = 2; j <= n; ++j) acc = combine(op, x[size_t((k + j) % n)][i], acc);
  return finish(op, acc, n);
}

// Tree order rooted at root: value(v) = op(op(x[v], value(left)), value(right)).
template <class T>
T tree_value(const std::vector<std::vector<T>>& x, int vrank, int root, size_t i, ReduceKind op) {
  const int n = int(x.size());
  T acc = x[size_t((vrank + root) % n)][i];
  if (2 * vrank + 1 < n) acc = combine(op, acc, tree_value(x, 2 * vrank + 1, root, i, op));
  if (2 * vrank + 2 < n) acc = combine(op, acc, tree_value(x, 2 * vrank + 2, root, i, op));
  return acc;
}
template <class T>
T tree_reference(const std::vector<std::vector<T>>& x, int root, size_t i, ReduceKind op) {
  return finish(op, tree_value(x, 0, root, i, op), int(x.size()));
}

// Any order, in double: for checks within a tolerance.
template <class T>
double loose_reference(const std::vector<std::vector<T>>& x, size_t i, ReduceKind op) {
  double acc = double(x[0][i]);
  for (size_t r = 1; r < x.size(); ++r) acc = combine<double>(op, acc, double(x[r][i]));
  return op == ReduceKind::Avg ? acc / double(x.size()) : acc;
}

// Elements that differ from the reference, counted with the first one kept:
// one assertion per buffer instead of one per element (which cost seconds
// under the sanitizers at the matrix's largest sizes).
struct Mismatches {
  size_t count = 0, first = 0;
  void note(bool same, size_t i) {
    if (!same && count++ == 0) first = i;
  }
};

template <class T>
bool same_bits(const T& a, const T& b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

template <class T>
bool bitwise_equal(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

inline std::vector<size_t> matrix_counts(int n) {
  return {0, 1, size_t(n > 1 ? n - 1 : 0), size_t(n + 1), 1000, 100003};
}

inline std::string world_name(const ::testing::TestParamInfo<std::tuple<TransportFactory, int>>& info) {
  return std::get<0>(info.param).name + "_n" + std::to_string(std::get<1>(info.param));
}

}  // namespace meshtrain::comm::testing
