// Tree all-reduce: reduce up a binary tree to its root, then broadcast down,
// each pipelined in chunks. For small messages: 2 floor(log2 n) steps deep
// instead of the ring's 2(n - 1).
//
// Terms:
//   vrank   rank relabelled so the root is 0: vrank = (rank - root) mod n.
//   parent, left, right
//           the tree neighbours of vrank v: (v - 1) / 2, 2v + 1, 2v + 2
//           (those < n), translated back to ranks.
//   chunk   the buffer is cut into chunks of at most chunk_bytes (at least
//           one, maybe empty); chunk c moves up (or down) one level per
//           pipeline step, so level l handles chunk c while level l - 1
//           handles chunk c + 1.
//   step    one exchange: in the reduce, send chunk c - 1 to parent while
//           chunk c arrives from both children; in the broadcast, send chunk
//           c - 1 to the children while chunk c arrives from parent.
//
// Order of combination, fixed whatever the timing: a node's value is
// op(op(own, left subtree), right subtree). The left child's chunk is
// reduced on receipt; the right child's lands in a scratch chunk and is
// reduced after the exchange, so the two never race. The root divides for
// Avg and the broadcast copies its bytes, so all ranks are bitwise equal.
//
// (A double binary tree would also use the leaves' send bandwidth; at the
// sizes Auto sends here the single tree is latency-bound anyway.)
#include <algorithm>
#include <cstring>
#include <vector>

#include "meshtrain/comm/collectives/collectives.hpp"
#include "meshtrain/comm/collectives/steps.hpp"
#include "meshtrain/comm/collectives/tree.hpp"

namespace meshtrain::comm {
namespace detail {
namespace {

struct TreeNode {
  int parent = -1, left = -1, right = -1;  // ranks, -1 when absent
};

TreeNode tree_node(int rank, int n, int root) {
  const int vrank = ((rank - root) % n + n) % n;
  auto to_rank = [&](int v) { return (v + root) % n; };
  TreeNode node;
  if (vrank > 0) node.parent = to_rank((vrank - 1) / 2);
  if (2 * vrank + 1 < n) node.left = to_rank(2 * vrank + 1);
  if (2 * vrank + 2 < n) node.right = to_rank(2 * vrank + 2);
  return node;
}

struct Chunks {
  size_t count, chunk_elems, width;
  size_t number() const { return std::max<size_t>((count + chunk_elems - 1) / chunk_elems, 1); }
  size_t begin(size_t c) const { return std::min(c * chunk_elems, count) * width; }
  size_t bytes(size_t c) const { return std::min((c + 1) * chunk_elems, count) * width - begin(c); }
};

}  // namespace

void tree_reduce(Transport& t, const std::byte* input, std::byte* accum, size_t count, DataType dtype,
                 ReduceKind op, int root, size_t chunk_bytes) {
  const int n = t.size();
  const size_t width = dtype_bytes(dtype);
  const TreeNode node = tree_node(t.rank(), n, root);
  const Chunks chunks{count, std::max<size_t>(chunk_bytes / width, 1), width};
  if (node.left < 0) {  // a leaf: its input is its subtree's value
    if (node.parent >= 0)
      exchange_chunked(t, node.parent, input, count * width, -1, nullptr, 0, nullptr, chunk_bytes, width);
    else if (accum != input)
      std::memcpy(accum, input, count * width);  // n == 1
  } else {
    std::unique_ptr<std::byte[]> own_accum;
    if (!accum) own_accum = scratch(count * width), accum = own_accum.get();
    if (accum != input) copy_bytes(accum, input, count * width);
    const Reduction reduction = reduction_for(op, dtype);
    auto right_chunk = scratch(chunks.bytes(0));
    const size_t steps = chunks.number();
    for (size_t chunk = 0; chunk < steps; ++chunk) {
      std::vector<SendOp> sends;
      std::vector<RecvOp> recvs;
      if (node.parent >= 0 && chunk > 0)
        sends.push_back({node.parent, accum + chunks.begin(chunk - 1), chunks.bytes(chunk - 1)});
      recvs.push_back({node.left, accum + chunks.begin(chunk), chunks.bytes(chunk), &reduction});
      if (node.right >= 0) recvs.push_back({node.right, right_chunk.get(), chunks.bytes(chunk), nullptr});
      t.exchange(sends, recvs);
      if (node.right >= 0) reduce_into(accum + chunks.begin(chunk), right_chunk.get(), chunks.bytes(chunk), reduction);
    }
    if (node.parent >= 0) {
      const size_t last = steps - 1;
      SendOp send{node.parent, accum + chunks.begin(last), chunks.bytes(last)};
      t.exchange({&send, 1}, {});
    }
  }
  if (node.parent < 0 && op == ReduceKind::Avg) scale_average(accum, count, dtype, n);
}

void tree_broadcast(Transport& t, std::byte* data, size_t count, size_t width, int root, size_t chunk_bytes) {
  const TreeNode node = tree_node(t.rank(), t.size(), root);
  const Chunks chunks{count, std::max<size_t>(chunk_bytes / width, 1), width};
  const size_t steps = chunks.number();
  std::vector<SendOp> sends;
  std::vector<RecvOp> recvs;
  auto send_to_children = [&](size_t chunk) {
    for (int child : {node.left, node.right})
      if (child >= 0) sends.push_back({child, data + chunks.begin(chunk), chunks.bytes(chunk)});
  };
  if (node.parent < 0) {  // the root has everything: post all chunks at once
    for (size_t chunk = 0; chunk < steps; ++chunk) send_to_children(chunk);
    t.exchange(sends, {});
    return;
  }
  for (size_t chunk = 0; chunk < steps; ++chunk) {
    sends.clear();
    recvs.clear();
    if (chunk > 0) send_to_children(chunk - 1);
    recvs.push_back({node.parent, data + chunks.begin(chunk), chunks.bytes(chunk), nullptr});
    t.exchange(sends, recvs);
  }
  sends.clear();
  send_to_children(steps - 1);
  if (!sends.empty()) t.exchange(sends, {});
}

}  // namespace detail

void tree_all_reduce(Transport& t, Buffer data, ReduceKind op, const CollectiveOptions& options) {
  if (t.size() == 1) return;
  auto* bytes = static_cast<std::byte*>(data.data);
  const size_t chunk = options.costs.tree_chunk_bytes;
  detail::tree_reduce(t, bytes, bytes, data.count, data.dtype, op, /*root=*/0, chunk);
  detail::tree_broadcast(t, bytes, data.count, dtype_bytes(data.dtype), /*root=*/0, chunk);
}

}  // namespace meshtrain::comm
