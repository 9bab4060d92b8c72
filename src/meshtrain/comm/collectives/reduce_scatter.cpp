// Reduce-scatter by the ring's first phase (ring_all_reduce.cpp explains the
// segments and steps): segment k of the input is reduced along the ring from
// rank k + 1 to rank k, which keeps it. The input is const, so the ring runs
// over a scratch copy; rank r then copies out its finished segment.
#include <cstring>
#include <string>

#include "meshtrain/comm/collectives/collectives.hpp"
#include "meshtrain/comm/collectives/ring.hpp"
#include "meshtrain/comm/collectives/steps.hpp"

namespace meshtrain::comm {

void reduce_scatter(Transport& t, ConstBuffer input, Buffer output, ReduceKind op,
                    const CollectiveOptions& options) {
  const int n = t.size(), r = t.rank();
  if (input.dtype != output.dtype) detail::invalid("reduce_scatter: input and output dtypes differ");
  if (input.count != size_t(n) * output.count)
    detail::invalid("reduce_scatter: input has " + std::to_string(input.count) + " elements, expected " +
                    std::to_string(n) + " ranks x " + std::to_string(output.count) + " output elements");
  const size_t width = dtype_bytes(input.dtype), segment = output.count;
  auto* in = static_cast<const std::byte*>(input.data);
  if (n == 1) {
    if (output.bytes() != 0) std::memmove(output.data, in, output.bytes());
    return;
  }
  auto work = detail::scratch(input.bytes());
  detail::copy_bytes(work.get(), in, input.bytes());
  std::vector<size_t> bounds(size_t(n) + 1);
  for (size_t k = 0; k <= size_t(n); ++k) bounds[k] = k * segment;
  detail::ring_reduce_scatter(t, work.get(), bounds, input.dtype, op, options.chunk_bytes);
  detail::copy_bytes(output.data, work.get() + size_t(r) * segment * width, output.bytes());
}

}  // namespace meshtrain::comm
