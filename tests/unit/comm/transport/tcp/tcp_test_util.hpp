#pragma once
// Ranks as threads in one process, over the TCP transport on loopback. The
// test hosts the rendezvous store on an ephemeral port, so suites can run in
// parallel without port collisions.
#include <gtest/gtest.h>

#include <barrier>
#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "meshtrain/comm/rendezvous/store_server.hpp"
#include "meshtrain/comm/transport/tcp/tcp_transport.hpp"
#include "meshtrain/core/error.hpp"

namespace meshtrain::comm::tcp_test {

using namespace std::chrono_literals;

inline const std::string kToken = "test-token-5f2c";
inline const std::string kJob = "tcp-test";

inline rendezvous::StoreOptions store_options(int world) {
  return rendezvous::StoreOptions{"127.0.0.1", 0, kToken, kJob, world, {}};
}

inline TcpOptions rank_options(int rank, int world, uint16_t store_port,
                               std::chrono::milliseconds timeout = 1000ms) {
  TcpOptions o;
  o.rank = rank;
  o.world_size = world;
  o.master_port = store_port;
  o.token = kToken;
  o.job_id = kJob;
  o.host_store = false;  // the test hosts it
  o.connect_timeout = 5000ms;
  o.transport.timeout = timeout;
  return o;
}

using RankFn = std::function<void(int rank, Transport& transport)>;

// Runs fn(rank, transport) on `world` threads; every transport stays open
// until all ranks are done. Returns each rank's exception (or null).
inline std::vector<std::exception_ptr> run_ranks_collect(rendezvous::TcpStore& store, int world, const RankFn& fn,
                                                         std::function<void(int, TcpOptions&)> tweak = {}) {
  std::vector<std::exception_ptr> errors(static_cast<size_t>(world));
  std::barrier done(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      std::unique_ptr<Transport> transport;
      try {
        TcpOptions o = rank_options(r, world, store.port());
        if (tweak) tweak(r, o);
        transport = connect_tcp(o);
        fn(r, *transport);
      } catch (...) {
        errors[r] = std::current_exception();
      }
      done.arrive_and_wait();
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

// As above, failing the test on any rank's exception.
inline void run_ranks(int world, const RankFn& fn) {
  rendezvous::TcpStore store(store_options(world));
  const auto errors = run_ranks_collect(store, world, fn);
  for (int r = 0; r < world; ++r) {
    if (!errors[r]) continue;
    try {
      std::rethrow_exception(errors[r]);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "rank " << r << " threw: " << e.what();
    }
  }
}

inline std::string what_of(const std::exception_ptr& e) {
  if (!e) return "";
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    return ex.what();
  }
  return "?";
}

// A deterministic byte pattern that differs per (rank, message).
inline std::vector<unsigned char> pattern(size_t bytes, int seed) {
  std::vector<unsigned char> v(bytes);
  uint32_t x = 2654435761u * static_cast<uint32_t>(seed + 1);
  for (auto& b : v) {
    x = x * 1664525u + 1013904223u;
    b = static_cast<unsigned char>(x >> 24);
  }
  return v;
}

}  // namespace meshtrain::comm::tcp_test
