#include "meshtrain/parallel/expert/device_expert_group.hpp"

#include <algorithm>
#include <vector>

namespace meshtrain::parallel {
namespace {

// Where each rank's segment starts, and the total.
std::vector<size_t> offsets_of(std::span<const size_t> counts) {
  std::vector<size_t> at(counts.size() + 1, 0);
  for (size_t r = 0; r < counts.size(); ++r) at[r + 1] = at[r] + counts[r];
  return at;
}

// The sends and receives of every peer's non-empty segment (the counts
// agree pairwise, so both sides leave out the same empty ones).
template <class T>
void exchange(comm::DeviceCollectives& rows, int self, const T* send, const std::vector<size_t>& send_at, T* recv,
              const std::vector<size_t>& recv_at) {
  const comm::DataType type = comm::dtype_of<T>();
  std::vector<comm::DeviceSend> sends;
  std::vector<comm::DeviceRecv> recvs;
  for (int peer = 0; peer + 1 < int(send_at.size()); ++peer) {
    if (peer == self) continue;
    const size_t p = size_t(peer);
    if (const size_t n = send_at[p + 1] - send_at[p]) sends.push_back({peer, {send + send_at[p], n, type}});
    if (const size_t n = recv_at[p + 1] - recv_at[p]) recvs.push_back({peer, {recv + recv_at[p], n, type}});
  }
  if (!sends.empty() || !recvs.empty()) rows.exchange_async(std::move(sends), std::move(recvs))->wait();
}

}  // namespace

DeviceExpertGroup::DeviceExpertGroup(std::unique_ptr<comm::DeviceCollectives> rows, comm::ProcessGroup& counts,
                                     kernels::Backend& backend, Precision wire)
    : rows_(std::move(rows)),
      counts_(counts),
      backend_(backend),
      bf16_(wire == Precision::Bf16),
      send16_(backend.allocator(), MemoryKind::Communication),
      recv16_(backend.allocator(), MemoryKind::Communication) {}

void DeviceExpertGroup::all_to_all_v(const float* send, std::span<const size_t> send_counts, float* recv,
                                     std::span<const size_t> recv_counts) {
  const std::vector<size_t> send_at = offsets_of(send_counts), recv_at = offsets_of(recv_counts);
  const size_t self = size_t(rank()), own = send_counts[self];
  if (!bf16_) {
    exchange(*rows_, rank(), send, send_at, recv, recv_at);
    if (own) backend_.copy(recv + recv_at[self], send + send_at[self], own);
    return;
  }
  send16_.ensure(std::max<size_t>(send_at.back(), 1));
  recv16_.ensure(std::max<size_t>(recv_at.back(), 1));
  backend_.to_bf16(send, send16_.raw(), send_at.back());
  exchange<Bf16>(*rows_, rank(), send16_.raw(), send_at, recv16_.raw(), recv_at);
  // Widened exactly (float(x) / 1); the rank's own segment straight from its rounded send.
  for (size_t r = 0; r + 1 < recv_at.size(); ++r) {
    const size_t n = recv_at[r + 1] - recv_at[r];
    if (!n) continue;
    const Bf16* from = r == self ? send16_.raw() + send_at[self] : recv16_.raw() + recv_at[r];
    backend_.widen_divided(from, recv + recv_at[r], n, 1.0f);
  }
}

void DeviceExpertGroup::all_to_all(const int64_t* send, int64_t* recv, size_t per_rank) {
  const size_t n = per_rank * size_t(size());
  counts_.all_to_all(std::span<const int64_t>(send, n), std::span<int64_t>(recv, n));
}

}  // namespace meshtrain::parallel
