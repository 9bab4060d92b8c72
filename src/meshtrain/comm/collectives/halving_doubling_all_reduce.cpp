// Recursive halving-doubling all-reduce (Rabenseifner): a reduce-scatter by
// recursive halving, then an all-gather by recursive doubling. 2 log2(p)
// steps that move 2(p - 1)/p of the buffer, for p a power of two.
//
// Terms:
//   p, extra  p = the largest power of two <= n; extra = n - p ranks fold in.
//   fold      before the halving, each even rank r < 2 extra sends its whole
//             buffer to r + 1, which reduces it in, and sits out; after the
//             doubling, r + 1 sends it the result. Every other rank takes a
//             new rank 0 .. p-1: r / 2 if r < 2 extra, else r - extra.
//   distance  d = p/2, p/4, ..., 1 while halving (1, 2, ..., p/2 while
//             doubling); the peer at a step is the rank whose new rank is
//             newrank XOR d.
//   range     the elements a rank is still responsible for; at each halving
//             step it keeps the lower half [lo, mid) if newrank & d == 0,
//             else the upper half [mid, hi), where mid = lo + (hi - lo) / 2.
//             Both peers share a range, so they agree on the split.
//   step      one exchange (chunked like the ring): halving sends the half
//             given away and reduces the peer's copy of the kept half into
//             it; doubling sends the whole range and receives the peer's.
//
// After halving, new rank q alone holds the finished value of its range (it
// divides it for Avg), and doubling only copies, so all ranks end bitwise
// identical. Every combination is op(local, incoming) of two partial results
// whose makeup depends only on n, never on timing.
#include <vector>

#include "meshtrain/comm/collectives/collectives.hpp"
#include "meshtrain/comm/collectives/steps.hpp"

namespace meshtrain::comm {

void halving_doubling_all_reduce(Transport& t, Buffer data, ReduceKind op, const CollectiveOptions& options) {
  const int n = t.size();
  if (n == 1) return;
  auto* bytes = static_cast<std::byte*>(data.data);
  const size_t width = dtype_bytes(data.dtype), total = data.bytes();
  const size_t chunk = options.chunk_bytes;
  const Reduction reduction = detail::reduction_for(op, data.dtype);
  const detail::PowerOfTwoFold fold = detail::fold_in(t, bytes, total, reduction, chunk, width);
  if (fold.newrank < 0) return;
  const int p = fold.p, newrank = fold.newrank;
  auto to_rank = [&](int q) { return fold.rank_of(q); };

  struct Range {
    size_t lo, hi;  // elements
  };
  std::vector<Range> parents, given;  // per halving step: the range before it, the half given away
  Range range{0, data.count};
  for (int distance = p / 2; distance >= 1; distance /= 2) {
    const int peer = to_rank(newrank ^ distance);
    const size_t mid = range.lo + (range.hi - range.lo) / 2;
    const Range keep = (newrank & distance) == 0 ? Range{range.lo, mid} : Range{mid, range.hi};
    const Range give = (newrank & distance) == 0 ? Range{mid, range.hi} : Range{range.lo, mid};
    detail::exchange_chunked(t, peer, bytes + give.lo * width, (give.hi - give.lo) * width, peer,
                             bytes + keep.lo * width, (keep.hi - keep.lo) * width, &reduction, chunk, width);
    parents.push_back(range);
    given.push_back(give);
    range = keep;
  }
  if (op == ReduceKind::Avg) detail::scale_average(bytes + range.lo * width, range.hi - range.lo, data.dtype, n);

  for (int distance = 1; distance < p; distance *= 2) {
    const int peer = to_rank(newrank ^ distance);
    const Range parent = parents.back(), other = given.back();  // the peer kept what this rank gave
    parents.pop_back();
    given.pop_back();
    detail::exchange_chunked(t, peer, bytes + range.lo * width, (range.hi - range.lo) * width, peer,
                             bytes + other.lo * width, (other.hi - other.lo) * width, nullptr, chunk, width);
    range = parent;
  }

  detail::fold_out(t, fold, bytes, total, chunk, width);
}

}  // namespace meshtrain::comm
