#pragma once
// A view of a transport restricted to the members of a process group: its
// ranks are group ranks 0 .. size-1, translated to the transport's global
// ranks on every exchange. Collectives run on it unchanged.
#include <atomic>
#include <cstdint>
#include <span>

#include "meshtrain/comm/transport/transport.hpp"

namespace meshtrain::comm {

class GroupTransport final : public Transport {
 public:
  // members[g] is the global rank of group rank g; group_rank is this
  // process's. Bytes sent are added to *bytes_sent when given.
  // halve_sends: every message goes out with half its bytes, so that the
  // peers' receives fail on its length (MESHTRAIN_FAULT=size_mismatch, a
  // testing knob: comm/flight/fault_injection.hpp).
  GroupTransport(Transport& global, std::span<const int> members, int group_rank,
                 std::atomic<uint64_t>* bytes_sent = nullptr, bool halve_sends = false)
      : global_(global), members_(members), group_rank_(group_rank), bytes_sent_(bytes_sent),
        halve_sends_(halve_sends) {}

  int rank() const override { return group_rank_; }
  int size() const override { return int(members_.size()); }
  std::string_view name() const override { return global_.name(); }
  void exchange(std::span<const SendOp> sends, std::span<const RecvOp> recvs) override;

 private:
  int global_rank(int group_rank) const;

  Transport& global_;
  std::span<const int> members_;
  int group_rank_;
  std::atomic<uint64_t>* bytes_sent_;
  bool halve_sends_;
};

}  // namespace meshtrain::comm
