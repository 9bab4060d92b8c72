// Reduce-scatter by the ring's first phase (ring_all_reduce.cpp explains the
// segments and steps): segment k of the input is reduced along the ring from
// rank k + 1 to rank k, which keeps it. The input is const, so the ring runs
// over a scratch copy (or, in place, over the caller's buffer); rank r then
// copies out its finished segment.
#include <cstring>
#include <string>

#include "meshtrain/comm/collectives/collectives.hpp"
#include "meshtrain/comm/collectives/ring.hpp"
#include "meshtrain/comm/collectives/steps.hpp"

namespace meshtrain::comm {

namespace {

void check_sizes(const char* what, size_t input_count, DataType input_dtype, const Buffer& output, int n) {
  if (input_dtype != output.dtype) detail::invalid(std::string(what) + ": input and output dtypes differ");
  if (input_count != size_t(n) * output.count)
    detail::invalid(std::string(what) + ": input has " + std::to_string(input_count) + " elements, expected " +
                    std::to_string(n) + " ranks x " + std::to_string(output.count) + " output elements");
}

// The ring over `work` (input-sized, clobbered), then rank r's segment out.
void ring_reduce_scatter_over(Transport& t, std::byte* work, DataType dtype, Buffer output, ReduceKind op,
                              const CollectiveOptions& options) {
  const int n = t.size(), r = t.rank();
  const size_t width = dtype_bytes(dtype), segment = output.count;
  std::vector<size_t> bounds(size_t(n) + 1);
  for (size_t k = 0; k <= size_t(n); ++k) bounds[k] = k * segment;
  detail::ring_reduce_scatter(t, work, bounds, dtype, op, options.chunk_bytes);
  std::byte* mine = work + size_t(r) * segment * width;
  if (output.data != mine && output.bytes() != 0) std::memmove(output.data, mine, output.bytes());
}

}  // namespace

void reduce_scatter(Transport& t, ConstBuffer input, Buffer output, ReduceKind op,
                    const CollectiveOptions& options) {
  const int n = t.size();
  check_sizes("reduce_scatter", input.count, input.dtype, output, n);
  auto* in = static_cast<const std::byte*>(input.data);
  if (n == 1) {
    if (output.bytes() != 0) std::memmove(output.data, in, output.bytes());
    return;
  }
  auto work = detail::scratch(input.bytes());
  detail::copy_bytes(work.get(), in, input.bytes());
  ring_reduce_scatter_over(t, work.get(), input.dtype, output, op, options);
}

void reduce_scatter_in_place(Transport& t, Buffer data, Buffer output, ReduceKind op,
                             const CollectiveOptions& options) {
  const int n = t.size();
  check_sizes("reduce_scatter_in_place", data.count, data.dtype, output, n);
  auto* work = static_cast<std::byte*>(data.data);
  if (n == 1) {
    if (output.bytes() != 0 && output.data != work) std::memmove(output.data, work, output.bytes());
    return;
  }
  ring_reduce_scatter_over(t, work, data.dtype, output, op, options);
}

}  // namespace meshtrain::comm
