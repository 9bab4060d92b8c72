// Dissemination barrier: ceil(log2 n) rounds. In round k (distance
// d = 2^k) rank r sends an empty message to (r + d) % n and waits for one
// from (r - d) % n; after the last round every rank has heard, directly or
// through others, from every rank, so none leaves before all have entered.
#include "meshtrain/comm/collectives/collectives.hpp"

namespace meshtrain::comm {

void barrier(Transport& t) {
  const int n = t.size(), r = t.rank();
  for (int distance = 1; distance < n; distance *= 2) {
    const SendOp send{(r + distance) % n, nullptr, 0};
    const RecvOp recv{(r - distance + n) % n, nullptr, 0, nullptr};
    t.exchange({&send, 1}, {&recv, 1});
  }
}

}  // namespace meshtrain::comm
