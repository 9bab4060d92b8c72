#pragma once
// Helpers for the shm transport tests: ranks as threads of this process or
// as fork()ed children. A child never returns into GoogleTest: it runs the
// rank body and _exit()s with a status the parent checks (0 = passed).
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "meshtrain/comm/transport/shm/shm_transport.hpp"
#include "meshtrain/core/error.hpp"

namespace meshtrain::comm::shm_test {

inline std::string unique_job_id(const std::string& tag) {
  static int counter = 0;
  return "test-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
}

inline ShmOptions options(const std::string& job, int rank, int world, int timeout_ms = 10000) {
  ShmOptions o;
  o.job_id = job;
  o.token = "0123456789abcdef0123456789abcdef";
  o.rank = rank;
  o.world_size = world;
  o.transport.timeout = std::chrono::milliseconds(timeout_ms);
  return o;
}

// Runs body(rank) on `world` threads; returns each rank's exception message
// ("" if it returned normally).
inline std::vector<std::string> run_threads(int world, const std::function<void(int)>& body) {
  std::vector<std::string> errors(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      try {
        body(r);
      } catch (const std::exception& e) {
        errors[r] = std::string("exception: ") + e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

// Runs body(rank) in `world` forked children; returns each child's exit
// status (0 = body returned true; 1 = false; 2 = threw; 128+n = signal n;
// 255 = killed after `limit`). Exception messages go to stderr.
inline std::vector<int> run_processes(int world, const std::function<bool(int)>& body,
                                      std::chrono::seconds limit = std::chrono::seconds(20)) {
  std::fflush(nullptr);
  std::vector<pid_t> pids;
  for (int r = 0; r < world; ++r) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      int status = 1;
      try {
        status = body(r) ? 0 : 1;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %d: %s\n", r, e.what());
        status = 2;
      } catch (...) {
        status = 2;
      }
      std::fflush(nullptr);
      ::_exit(status);
    }
    pids.push_back(pid);
  }
  std::vector<int> codes(world, -1);
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (int done = 0; done < world;) {
    for (int r = 0; r < world; ++r) {
      int st = 0;
      if (codes[r] != -1 || ::waitpid(pids[r], &st, WNOHANG) != pids[r]) continue;
      codes[r] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      ++done;
    }
    if (done < world && std::chrono::steady_clock::now() > deadline) {
      for (int r = 0; r < world; ++r) {
        if (codes[r] != -1) continue;
        ::kill(pids[r], SIGKILL);
        ::waitpid(pids[r], nullptr, 0);
        codes[r] = 255;
        ++done;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return codes;
}

// Deterministic test bytes: message `seed`, byte i.
inline uint8_t pattern(uint64_t seed, size_t i) {
  return uint8_t((i * 131 + seed * 7919 + (i >> 11)) ^ (seed >> 3));
}
inline void fill(std::vector<uint8_t>& buf, uint64_t seed) {
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = pattern(seed, i);
}
inline bool matches(const std::vector<uint8_t>& buf, uint64_t seed) {
  for (size_t i = 0; i < buf.size(); ++i) {
    if (buf[i] != pattern(seed, i)) return false;
  }
  return true;
}

// Rank 0 sends `sizes.size()` messages (message m: sizes[m] pattern bytes) to
// rank 1, `per_exchange` of them per exchange; true if every message this
// rank holds afterwards is intact and in its place.
inline bool send_in_batches(Transport& t, int rank, const std::vector<size_t>& sizes, int per_exchange) {
  const int count = int(sizes.size());
  std::vector<std::vector<uint8_t>> bufs(sizes.size());
  for (int m = 0; m < count; ++m) {
    bufs[m].resize(sizes[m]);
    if (rank == 0) fill(bufs[m], m);
  }
  for (int m = 0; m < count; m += per_exchange) {
    std::vector<SendOp> sends;
    std::vector<RecvOp> recvs;
    for (int k = m; k < std::min(m + per_exchange, count); ++k) {
      if (rank == 0) sends.push_back({1, bufs[k].data(), bufs[k].size()});
      if (rank == 1) recvs.push_back({0, bufs[k].data(), bufs[k].size(), nullptr});
    }
    t.exchange(sends, recvs);
  }
  bool all = true;
  for (int m = 0; m < count; ++m) all = all && matches(bufs[m], m);
  return all;
}

inline bool segment_exists(const std::string& job) {
  return ::access(("/dev/shm" + shm_segment_name(job)).c_str(), F_OK) == 0;
}

}  // namespace meshtrain::comm::shm_test
