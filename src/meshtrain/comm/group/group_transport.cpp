#include "meshtrain/comm/group/group_transport.hpp"

#include <string>
#include <utility>
#include <vector>

#include "meshtrain/core/error.hpp"

namespace meshtrain::comm {

int GroupTransport::global_rank(int group_rank) const {
  if (group_rank < 0 || group_rank >= size())
    throw CommError("group rank " + std::to_string(group_rank) + " is outside the group of " +
                    std::to_string(size()));
  return members_[size_t(group_rank)];
}

void GroupTransport::exchange(std::span<const SendOp> sends, std::span<const RecvOp> recvs) {
  // A GroupTransport is built for every collective call, so the translated
  // copies live in per-thread buffers that each exchange borrows and gives
  // back: no allocation per call once they have grown (a nested exchange
  // finds them lent out and uses fresh ones).
  thread_local std::vector<SendOp> spare_sends;
  thread_local std::vector<RecvOp> spare_recvs;
  std::vector<SendOp> global_sends = std::move(spare_sends);
  std::vector<RecvOp> global_recvs = std::move(spare_recvs);
  global_sends.assign(sends.begin(), sends.end());
  global_recvs.assign(recvs.begin(), recvs.end());
  for (SendOp& op : global_sends) op.peer = global_rank(op.peer);
  if (halve_sends_) [[unlikely]]
    for (SendOp& op : global_sends) op.bytes /= 2;
  for (RecvOp& op : global_recvs) op.peer = global_rank(op.peer);
  global_.exchange(global_sends, global_recvs);
  if (bytes_sent_) {
    uint64_t bytes = 0;
    for (const SendOp& op : global_sends) bytes += op.bytes;
    bytes_sent_->fetch_add(bytes, std::memory_order_relaxed);
  }
  spare_sends = std::move(global_sends);
  spare_recvs = std::move(global_recvs);
}

}  // namespace meshtrain::comm
