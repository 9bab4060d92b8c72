// All-gather by the ring's second phase (ring_all_reduce.cpp explains the
// segments and steps): rank r's input becomes segment r of the output and
// travels n - 1 steps around the ring, copied, never combined.
#include <cstring>
#include <string>

#include "meshtrain/comm/collectives/collectives.hpp"
#include "meshtrain/comm/collectives/ring.hpp"
#include "meshtrain/comm/collectives/steps.hpp"

namespace meshtrain::comm {

void all_gather(Transport& t, ConstBuffer input, Buffer output, const CollectiveOptions& options) {
  const int n = t.size(), r = t.rank();
  if (input.dtype != output.dtype) detail::invalid("all_gather: input and output dtypes differ");
  if (output.count != size_t(n) * input.count)
    detail::invalid("all_gather: output has " + std::to_string(output.count) + " elements, expected " +
                    std::to_string(n) + " ranks x " + std::to_string(input.count) + " input elements");
  const size_t width = dtype_bytes(input.dtype), segment = input.count;
  auto* out = static_cast<std::byte*>(output.data);
  std::byte* own = out + size_t(r) * segment * width;
  if (own != input.data) std::memmove(own, input.data, input.bytes());  // in place when input is segment r
  std::vector<size_t> bounds(size_t(n) + 1);
  for (size_t k = 0; k <= size_t(n); ++k) bounds[k] = k * segment;
  detail::ring_all_gather(t, out, bounds, width, options.chunk_bytes);
}

}  // namespace meshtrain::comm
