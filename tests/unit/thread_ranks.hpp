#pragma once
// Ranks as threads in one process, as the parallel layers' unit tests run
// them (Gloo's tests do the same). One helper for every such test, so each
// joins every thread and rethrows a rank's error instead of terminating.
#include <cstddef>
#include <exception>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "meshtrain/comm/group/communicator.hpp"
#include "meshtrain/comm/group/process_group.hpp"
#include "meshtrain/comm/transport/inproc/inproc_transport.hpp"

namespace meshtrain::testing {

// Runs body(rank) on `ranks` threads and returns when all have finished;
// then rethrows the lowest rank's error, if any threw.
template <class Body>
void on_every_rank(int ranks, Body&& body) {
  std::vector<std::exception_ptr> errors(static_cast<size_t>(ranks));
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(ranks));
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      try {
        body(r);
      } catch (...) {
        errors[size_t(r)] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

// As on_every_rank, each rank given its process group over the in-process
// transport: body(rank, group).
template <class Body>
void on_inproc_ranks(int ranks, Body&& body) {
  auto transports = comm::make_inproc_transports(ranks);
  on_every_rank(ranks, [&](int r) {
    comm::ProcessGroup group(std::make_shared<comm::Communicator>(std::move(transports[size_t(r)])));
    body(r, group);
  });
}

}  // namespace meshtrain::testing
