#include "meshtrain/comm/device/host_staged_collectives.hpp"

namespace meshtrain::comm {

// An all-reduce in flight on the host: on wait() its result goes back up.
class StagedWork final : public DeviceWork {
 public:
  StagedWork(HostStagedCollectives& owner, Buffer device_data, HostStagedCollectives::Scratch scratch, WorkHandle host)
      : owner_(owner), device_data_(device_data), scratch_(std::move(scratch)), host_(std::move(host)) {}
  ~StagedWork() override {
    // Abandoned (a step that threw): the communication thread may still
    // write the scratch, so let it finish before the pool has it back.
    try {
      host_->wait();
    } catch (const std::exception&) {
    }
    if (scratch_) owner_.free_.push_back(std::move(scratch_));
  }
  void wait() override {
    host_->wait();
    if (scratch_) owner_.upload(device_data_, std::move(scratch_));
  }
  double busy_seconds() const override { return host_->busy_seconds(); }

 private:
  HostStagedCollectives& owner_;
  Buffer device_data_;
  HostStagedCollectives::Scratch scratch_;  // null: the collective ran on the values themselves
  WorkHandle host_;
};

HostStagedCollectives::HostStagedCollectives(ProcessGroup& group, DeviceAllocator* device,
                                             AllReduceAlgorithm algorithm)
    : group_(group), device_(device), algorithm_(algorithm) {}

HostStagedCollectives::~HostStagedCollectives() = default;

HostStagedCollectives::Scratch HostStagedCollectives::download(Buffer data) {
  const size_t floats = (data.bytes() + sizeof(float) - 1) / sizeof(float);
  // The smallest free scratch that holds it (a strategy's buckets come in
  // the same sizes every step), else a new one.
  auto pick = free_.end();
  for (auto it = free_.begin(); it != free_.end(); ++it)
    if ((*it)->size() >= floats && (pick == free_.end() || (*it)->size() < (*pick)->size())) pick = it;
  Scratch scratch;
  if (pick != free_.end()) {
    scratch = std::move(*pick);
    free_.erase(pick);
  } else {
    scratch = std::make_unique<AlignedBuffer<float>>(floats, MemoryKind::Communication);
  }
  device_->download(scratch->data(), data.data, data.bytes());
  return scratch;
}

void HostStagedCollectives::upload(Buffer data, Scratch scratch) {
  device_->upload(data.data, scratch->data(), data.bytes());
  free_.push_back(std::move(scratch));
}

DeviceWorkHandle HostStagedCollectives::all_reduce_async(Buffer data, ReduceKind op) {
  if (!device_)
    return std::make_unique<StagedWork>(*this, data, nullptr, group_.all_reduce_async(data, op, algorithm_));
  Scratch scratch = download(data);
  const Buffer host(scratch->data(), data.count, data.dtype);
  WorkHandle work = group_.all_reduce_async(host, op, algorithm_);
  return std::make_unique<StagedWork>(*this, data, std::move(scratch), std::move(work));
}

void HostStagedCollectives::broadcast(Buffer data, int root) {
  if (!device_) return group_.broadcast(data, root);
  // Once per job: its scratch (often the whole model) is its own, not the pool's.
  AlignedBuffer<float> scratch((data.bytes() + sizeof(float) - 1) / sizeof(float), MemoryKind::Communication);
  device_->download(scratch.data(), data.data, data.bytes());
  group_.broadcast(Buffer(scratch.data(), data.count, data.dtype), root);
  device_->upload(data.data, scratch.data(), data.bytes());
}

}  // namespace meshtrain::comm
