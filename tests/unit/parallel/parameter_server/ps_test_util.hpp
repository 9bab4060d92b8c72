#pragma once
// Fixtures for parameter-server tests: a store of five tensors of uneven
// sizes (two without weight decay), deterministic gradients, and options for
// servers and clients on loopback with short timeouts.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "meshtrain/core/param_store.hpp"
#include "meshtrain/parallel/parameter_server/client.hpp"
#include "meshtrain/parallel/parameter_server/server.hpp"

namespace meshtrain::parallel::ps::testing {

inline void make_store(ParamStore& s) {
  s.declare("emb", {40, 8}, true);
  s.declare("ln.bias", {8}, false);
  s.declare("fc.weight", {8, 24}, true);
  s.declare("fc.bias", {24}, false);
  s.declare("head", {24, 5}, true);
  s.allocate();
  for (size_t i = 0; i < s.flat_size(); ++i) s.params()[i] = float(0.3 * std::cos(0.37 * double(i)));
}

// Gradient of flat element i at push k: varied signs and sizes.
inline void set_grads(ParamStore& s, int k) {
  for (size_t i = 0; i < s.flat_size(); ++i) s.grads()[i] = float(0.2 * std::sin(0.9 * double(i) + 1.3 * k) + 0.01 * k);
}

inline bool bitwise_equal(const float* a, const float* b, size_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

inline ServerOptions server_options(int index, int num_servers, int num_workers, int64_t total_steps) {
  ServerOptions o;
  o.state.index = index;
  o.state.num_workers = num_workers;
  o.state.total_steps = total_steps;
  o.state.optimizer.kind = OptimizerKind::AdamW;
  o.state.optimizer.weight_decay = 0.1;
  o.state.schedule = ScheduleConfig{.warmup_steps = 1, .decay = LrDecay::Cosine, .total_steps = 10, .min_lr_ratio = 0.1};
  o.state.base_lr = 0.01;
  o.num_servers = num_servers;
  o.servers.assign(static_cast<size_t>(num_servers), comm::tcp::Endpoint{"127.0.0.1", 0});
  o.world_size = num_workers + num_servers;
  o.token = "secret";
  o.job_id = "ps-test";
  o.timeout = std::chrono::milliseconds(5000);
  o.drain = std::chrono::milliseconds(2000);
  o.log = nullptr;
  return o;
}

inline ClientOptions client_options(const std::vector<uint16_t>& ports, int rank, int world_size) {
  ClientOptions o;
  for (uint16_t p : ports) o.servers.push_back({"127.0.0.1", p});
  o.token = "secret";
  o.job_id = "ps-test";
  o.rank = rank;
  o.world_size = world_size;
  o.timeout = std::chrono::milliseconds(5000);
  return o;
}

}  // namespace meshtrain::parallel::ps::testing
