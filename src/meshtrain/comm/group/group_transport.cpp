#include "meshtrain/comm/group/group_transport.hpp"

#include <string>

#include "meshtrain/core/error.hpp"

namespace meshtrain::comm {

int GroupTransport::global_rank(int group_rank) const {
  if (group_rank < 0 || group_rank >= size())
    throw CommError("group rank " + std::to_string(group_rank) + " is outside the group of " +
                    std::to_string(size()));
  return members_[size_t(group_rank)];
}

void GroupTransport::exchange(std::span<const SendOp> sends, std::span<const RecvOp> recvs) {
  sends_.assign(sends.begin(), sends.end());
  recvs_.assign(recvs.begin(), recvs.end());
  for (SendOp& op : sends_) op.peer = global_rank(op.peer);
  for (RecvOp& op : recvs_) op.peer = global_rank(op.peer);
  global_.exchange(sends_, recvs_);
  if (bytes_sent_) {
    uint64_t bytes = 0;
    for (const SendOp& op : sends_) bytes += op.bytes;
    bytes_sent_->fetch_add(bytes, std::memory_order_relaxed);
  }
}

}  // namespace meshtrain::comm
