#include "meshtrain/comm/device/host_staged_collectives.hpp"

#include <vector>

#include "meshtrain/core/host_memory.hpp"

namespace meshtrain::comm {

// A result that goes back up when a staged collective is waited for: the
// host copy at `from` into the device's `to`.
struct StagedUpload {
  Buffer to;
  const void* from = nullptr;
};

// A collective in flight on the host: on wait() its results go back up to
// the device, and the scratch returns to the pool. No scratch: it ran on the
// values themselves.
class StagedWork final : public DeviceWork {
 public:
  StagedWork(HostStagedCollectives& owner, WorkHandle host, std::vector<StagedUpload> uploads = {},
             std::vector<HostStagedCollectives::Scratch> scratch = {})
      : owner_(owner), host_(std::move(host)), uploads_(std::move(uploads)), scratch_(std::move(scratch)) {}
  ~StagedWork() override {
    // Abandoned (a step that threw): the communication thread may still
    // write the scratch, so let it finish before the pool has it back.
    try {
      host_->wait();
    } catch (const std::exception&) {
    }
    give_back();
  }
  void wait() override {
    host_->wait();
    for (const StagedUpload& u : uploads_) owner_.device_->upload(u.to.data, u.from, u.to.bytes());
    uploads_.clear();
    give_back();
  }
  double busy_seconds() const override { return host_->busy_seconds(); }

 private:
  void give_back() {
    for (auto& s : scratch_) owner_.free_.push_back(std::move(s));
    scratch_.clear();
  }

  HostStagedCollectives& owner_;
  WorkHandle host_;
  std::vector<StagedUpload> uploads_;
  std::vector<HostStagedCollectives::Scratch> scratch_;
};

HostStagedCollectives::HostStagedCollectives(ProcessGroup& group, DeviceAllocator* device,
                                             AllReduceAlgorithm algorithm)
    : group_(group),
      device_(device),
      staging_(device && device->staging_memory() ? *device->staging_memory() : host_memory()),
      algorithm_(algorithm) {}

HostStagedCollectives::~HostStagedCollectives() = default;

HostStagedCollectives::Scratch HostStagedCollectives::take(size_t bytes) {
  const size_t floats = (bytes + sizeof(float) - 1) / sizeof(float);
  // The smallest free scratch that holds it (a strategy's buckets come in
  // the same sizes every step), else a new one.
  auto pick = free_.end();
  for (auto it = free_.begin(); it != free_.end(); ++it)
    if ((*it)->size() >= floats && (pick == free_.end() || (*it)->size() < (*pick)->size())) pick = it;
  if (pick == free_.end()) return std::make_unique<AlignedBuffer<float>>(staging_, floats, MemoryKind::Communication);
  Scratch scratch = std::move(*pick);
  free_.erase(pick);
  return scratch;
}

HostStagedCollectives::Scratch HostStagedCollectives::download(ConstBuffer data) {
  Scratch scratch = take(data.bytes());
  device_->download(scratch->data(), data.data, data.bytes());
  return scratch;
}

DeviceWorkHandle HostStagedCollectives::all_reduce_async(Buffer data, ReduceKind op) {
  if (!device_) return std::make_unique<StagedWork>(*this, group_.all_reduce_async(data, op, algorithm_));
  Scratch scratch = download(data);
  WorkHandle work = group_.all_reduce_async(Buffer(scratch->data(), data.count, data.dtype), op, algorithm_);
  const void* result = scratch->data();
  std::vector<Scratch> held;
  held.push_back(std::move(scratch));
  return std::make_unique<StagedWork>(*this, std::move(work), std::vector{StagedUpload{data, result}}, std::move(held));
}

DeviceWorkHandle HostStagedCollectives::reduce_scatter_async(Buffer data, Buffer output, ReduceKind op) {
  if (!device_) return std::make_unique<StagedWork>(*this, group_.reduce_scatter_in_place_async(data, output, op));
  std::vector<Scratch> held;
  held.push_back(download(data));
  char* host = reinterpret_cast<char*>(held[0]->data());
  // The output where it lies in the host copy when it is a part of `data`,
  // else in scratch of its own.
  const auto* begin = static_cast<const char*>(data.data);
  const auto* at = static_cast<const char*>(output.data);
  void* host_output = nullptr;
  if (at >= begin && at + output.bytes() <= begin + data.bytes()) {
    host_output = host + (at - begin);
  } else {
    held.push_back(take(output.bytes()));
    host_output = held.back()->data();
  }
  WorkHandle work = group_.reduce_scatter_in_place_async(Buffer(host, data.count, data.dtype),
                                                         Buffer(host_output, output.count, output.dtype), op);
  return std::make_unique<StagedWork>(*this, std::move(work), std::vector{StagedUpload{output, host_output}},
                                      std::move(held));
}

DeviceWorkHandle HostStagedCollectives::all_gather_async(Buffer data) {
  const size_t segment = equal_segment(data, group_.size(), "host-staged collectives");
  const size_t at = segment * dtype_bytes(data.dtype) * size_t(group_.rank());
  const auto mine = [&](void* base) { return ConstBuffer(static_cast<char*>(base) + at, segment, data.dtype); };
  if (!device_) return std::make_unique<StagedWork>(*this, group_.all_gather_async(mine(data.data), data));
  // Only this rank's segment goes down; the whole gathered buffer comes up.
  std::vector<Scratch> held;
  held.push_back(take(data.bytes()));
  void* host = held[0]->data();
  device_->download(static_cast<char*>(host) + at, static_cast<const char*>(data.data) + at,
                    segment * dtype_bytes(data.dtype));
  WorkHandle work = group_.all_gather_async(mine(host), Buffer(host, data.count, data.dtype));
  return std::make_unique<StagedWork>(*this, std::move(work), std::vector{StagedUpload{data, host}}, std::move(held));
}

DeviceWorkHandle HostStagedCollectives::exchange_async(std::vector<DeviceSend> sends, std::vector<DeviceRecv> recvs) {
  std::vector<SendOp> host_sends;
  std::vector<RecvOp> host_recvs;
  std::vector<StagedUpload> uploads;
  std::vector<Scratch> held;
  // Each send goes down into scratch of its own, each receive lands in
  // another and goes up when waited for; on the host, the values themselves.
  for (const DeviceSend& send : sends) {
    const void* data = send.data.data;
    if (device_) {
      held.push_back(download(send.data));
      data = held.back()->data();
    }
    host_sends.push_back({send.peer, data, send.data.bytes()});
  }
  for (const DeviceRecv& recv : recvs) {
    void* data = recv.data.data;
    if (device_) {
      held.push_back(take(recv.data.bytes()));
      data = held.back()->data();
      uploads.push_back({recv.data, data});
    }
    host_recvs.push_back({recv.peer, data, recv.data.bytes(), nullptr});
  }
  WorkHandle work = group_.exchange_async(std::move(host_sends), std::move(host_recvs));
  return std::make_unique<StagedWork>(*this, std::move(work), std::move(uploads), std::move(held));
}

void HostStagedCollectives::broadcast(Buffer data, int root) {
  if (!device_) return group_.broadcast(data, root);
  // Once per job: its scratch (often the whole model) is its own, not the
  // pool's, and pageable (pinning it would cost about what it saves).
  AlignedBuffer<float> scratch((data.bytes() + sizeof(float) - 1) / sizeof(float), MemoryKind::Communication);
  device_->download(scratch.data(), data.data, data.bytes());
  group_.broadcast(Buffer(scratch.data(), data.count, data.dtype), root);
  device_->upload(data.data, scratch.data(), data.bytes());
}

}  // namespace meshtrain::comm
