// Broadcast and reduce to a root: the two halves of the pipelined binary tree
// (tree_all_reduce.cpp explains vrank, parent, children, chunk and step),
// rooted at `root`.
#include <string>

#include "meshtrain/comm/collectives/collectives.hpp"
#include "meshtrain/comm/collectives/steps.hpp"
#include "meshtrain/comm/collectives/tree.hpp"

namespace meshtrain::comm {
namespace {
void check_root(const char* what, int root, int n) {
  if (root < 0 || root >= n)
    detail::invalid(std::string(what) + ": root " + std::to_string(root) + " is outside the group of " +
                    std::to_string(n));
}
}  // namespace

void broadcast(Transport& t, Buffer data, int root, const CollectiveOptions& options) {
  check_root("broadcast", root, t.size());
  if (t.size() == 1) return;
  detail::tree_broadcast(t, static_cast<std::byte*>(data.data), data.count, dtype_bytes(data.dtype), root,
                         options.chunk_bytes);
}

void reduce(Transport& t, Buffer data, int root, ReduceKind op, const CollectiveOptions& options) {
  check_root("reduce", root, t.size());
  if (t.size() == 1) return;
  auto* bytes = static_cast<std::byte*>(data.data);
  detail::tree_reduce(t, bytes, t.rank() == root ? bytes : nullptr, data.count, data.dtype, op, root,
                      options.chunk_bytes);
}

}  // namespace meshtrain::comm
