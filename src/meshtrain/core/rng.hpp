#pragma once
// Deterministic random numbers (xoshiro256**), the same on every platform and
// compiler, with a state that a checkpoint saves and restores exactly.
#include <array>
#include <cstdint>

namespace meshtrain {

class Rng {
 public:
  using State = std::array<uint64_t, 4>;

  explicit Rng(uint64_t seed = 0);
  // A generator for a sub-stream (a rank, a layer) that does not overlap this one's.
  static Rng derive(uint64_t seed, uint64_t stream);

  uint64_t next_u64();
  // Uniform in [0, bound), unbiased.
  uint64_t below(uint64_t bound);
  // Uniform in [0, 1) with 24 random bits.
  float uniform();
  // Standard normal via Box-Muller; keeps no cached spare, so the state alone
  // determines the next value.
  float normal();

  State state() const { return s_; }
  void set_state(const State& s) { s_ = s; }

 private:
  State s_{};
};

}  // namespace meshtrain
