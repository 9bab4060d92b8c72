#pragma once
// Test harness for the collectives: worlds of ranks as communicators in one
// process, built by a transport factory, and serial references.
//
// Each test world submits the same collective on every rank's process group
// from the test thread (the _async forms), then waits on all handles: the
// communicators' threads are the ranks, as Gloo's tests use threads.
//
// To run the whole matrix over another transport, add one line to
// transport_factories() that builds `world_size` connected transports.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <algorithm>
#include <cstring>
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
#include "meshtrain/comm/transport/inproc/inproc_transport.hpp"

namespace meshtrain::comm::testing {

using namespace std::chrono_literals;

struct TransportFactory {
  std::string name;
  // The transports of one world: result[r].rank() == r. A factory whose
  // transports connect concurrently (tcp) starts its own threads.
  std::function<std::vector<std::unique_ptr<Transport>>(int world_size, std::chrono::milliseconds timeout)> make;
};
inline void PrintTo(const TransportFactory& f, std::ostream* os) { *os << f.name; }

inline std::vector<TransportFactory> transport_factories() {
  return {
      {"inproc",
       [](int n, std::chrono::milliseconds timeout) {
         InprocOptions options;
         options.transport.timeout = timeout;
         options.queue_capacity_bytes = 64 << 10;  // small, so senders do wait for room
         return make_inproc_transports(n, options);
       }},
      // {"shm", ...},  {"tcp", ...}: one line each, once those transports land.
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
    for (auto& t : factory.make(n, timeout)) comms.push_back(std::make_shared<Communicator>(std::move(t), options));
    for (auto& c : comms) groups.emplace_back(c);
  }
  int size() const { return int(comms.size()); }
  // Runs submit(rank) on every rank and waits for all handles.
  void run(const std::function<WorkHandle(int rank)>& submit) {
    std::vector<WorkHandle> works;
    for (int r = 0; r < size(); ++r) works.push_back(submit(r));
    for (auto& w : works) w->wait();
  }
  std::vector<std::shared_ptr<Communicator>> comms;
  std::vector<ProcessGroup> groups;
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
