#pragma once
// A run of a ParamStore's flat layout that one rank owns under ZeRO, and
// where it sits in that rank's shard buffers (parameters, gradients,
// optimizer state all share the shard layout). The whole store is the one
// segment {0, flat_size, 0}.
#include <cstddef>
#include <vector>

namespace meshtrain {

struct FlatSegment {
  size_t begin = 0;  // flat element index, inclusive
  size_t end = 0;    // exclusive
  size_t local = 0;  // index of `begin` in the shard buffers
  size_t size() const { return end - begin; }
};

using FlatSegments = std::vector<FlatSegment>;

}  // namespace meshtrain
