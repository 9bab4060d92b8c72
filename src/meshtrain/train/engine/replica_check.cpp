#include "meshtrain/train/engine/replica_check.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "meshtrain/core/error.hpp"

namespace meshtrain {
namespace {

uint64_t fnv1a(const float* data, size_t n) {
  uint64_t h = 14695981039346656037ull;
  const auto* bytes = reinterpret_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n * sizeof(float); ++i) {
    h ^= bytes[i];
    h *= 1099511628211ull;
  }
  return h;
}

// Each tensor's hash as two doubles (32 bits each: exact). Off the CPU the
// parameters are hashed in a host copy.
std::vector<double> tensor_hashes(const ParamStore& store) {
  std::vector<double> out;
  std::vector<float> downloaded(store.on_host() ? 0 : store.flat_size());
  if (!store.on_host()) store.download_params(downloaded);
  const float* params = store.on_host() ? store.params().data() : downloaded.data();
  for (const ParamView& v : store.views()) {
    const uint64_t h = fnv1a(params + v.offset, v.numel);
    out.push_back(double(h >> 32));
    out.push_back(double(h & 0xffffffffu));
  }
  return out;
}

}  // namespace

void check_replicas(const ParamStore& store, parallel::ParallelContext& workers, int64_t step) {
  const std::vector<std::vector<double>> all = workers.all_gather_workers(tensor_hashes(store));
  // Replica sets: the workers at the same pipeline, tensor and expert position.
  std::map<std::tuple<int, int, int>, std::vector<int>> sets;
  for (int r = 0; r < workers.workers(); ++r) {
    const comm::MeshCoord c = workers.mesh().coord(r);
    sets[{c.pp, c.tp, c.ep}].push_back(r);
  }
  const int me = workers.worker_rank();
  std::string mine, elsewhere;
  for (const auto& [key, members] : sets) {
    if (members.size() < 2) continue;
    const size_t tensors = all[size_t(members[0])].size() / 2;
    for (size_t t = 0; t < tensors; ++t) {
      std::map<std::pair<double, double>, std::vector<int>> by_hash;
      for (int r : members) by_hash[{all[size_t(r)][2 * t], all[size_t(r)][2 * t + 1]}].push_back(r);
      if (by_hash.size() < 2) continue;
      size_t most = 0;
      for (const auto& [h, rs] : by_hash) most = std::max(most, rs.size());
      std::vector<int> outside;  // the workers outside the largest agreeing group (all of them on a tie)
      for (const auto& [h, rs] : by_hash)
        if (rs.size() < most || by_hash.size() == members.size()) outside.insert(outside.end(), rs.begin(), rs.end());
      if (outside.empty()) outside = members;  // two equal camps: no majority to trust
      std::sort(outside.begin(), outside.end());
      std::string odd;
      for (int r : outside) odd += (odd.empty() ? "" : ", ") + std::to_string(r);
      const bool my_set = std::find(members.begin(), members.end(), me) != members.end();
      if (my_set && mine.empty())
        mine = "worker(s) " + odd + " differ from their replicas in " + store.view(t).name;
      else if (!my_set && elsewhere.empty())
        elsewhere = "worker(s) " + odd + " differ from their replicas in their tensor #" + std::to_string(t);
    }
  }
  if (mine.empty() && elsewhere.empty()) return;
  throw Error("step " + std::to_string(step) + ": silent data corruption (training.check_replicas_every): " +
              (mine.empty() ? elsewhere : mine) +
              ". Their parameters should be the same bits; the job restarts from its newest checkpoint. A host "
              "that repeats this has faulty memory or a faulty core");
}

void flip_parameter_bit(ParamStore& store) {
  store.fill_params_on_host([&] {  // on any device
    float* p = store.param(store.views().size() / 2);
    uint32_t bits;
    std::memcpy(&bits, p, sizeof bits);
    bits ^= 1u;
    std::memcpy(p, &bits, sizeof bits);
  });
}

}  // namespace meshtrain
