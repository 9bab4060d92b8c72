#include "meshtrain/parallel/tensor/device_tensor_group.hpp"

#include "meshtrain/parallel/bf16_wire.hpp"

namespace meshtrain::parallel {
namespace {

comm::Buffer floats(float* data, size_t count) { return {data, count, comm::DataType::F32}; }
comm::Buffer halves(Bf16* data, size_t count) { return {data, count, comm::DataType::BF16}; }

}  // namespace

DeviceTensorGroup::DeviceTensorGroup(std::unique_ptr<comm::DeviceCollectives> collectives, kernels::Backend& backend,
                                     bool sequence_parallel, Precision wire)
    : collectives_(std::move(collectives)),
      backend_(backend),
      sequence_parallel_(sequence_parallel),
      bf16_(wire == Precision::Bf16),
      wire_(backend.allocator(), MemoryKind::Communication) {}

Bf16* DeviceTensorGroup::wire(size_t count) {
  wire_.ensure(count);
  return wire_.raw();
}

void DeviceTensorGroup::all_reduce_sum(float* data, size_t count) {
  if (!bf16_) return all_reduce_sum_fp32(data, count);
  all_reduce_sum_in_bf16(*collectives_, backend_, data, count, wire_);
}

void DeviceTensorGroup::all_reduce_sum_fp32(float* data, size_t count) {
  collectives_->all_reduce_async(floats(data, count), comm::ReduceKind::Sum)->wait();
}

void DeviceTensorGroup::all_reduce_max(float* data, size_t count) {
  collectives_->all_reduce_async(floats(data, count), comm::ReduceKind::Max)->wait();
}

void DeviceTensorGroup::all_reduce_min(int32_t* data, size_t count) {
  collectives_->all_reduce_async(comm::Buffer(data, count, comm::DataType::I32), comm::ReduceKind::Min)->wait();
}

void DeviceTensorGroup::all_gather(const float* in, float* out, size_t count_per_rank) {
  const size_t count = count_per_rank * size_t(size()), at = count_per_rank * size_t(rank());
  if (bf16_) {
    Bf16* gathered = wire(count);
    backend_.to_bf16(in, gathered + at, count_per_rank);  // first: `in` may be out's chunk
    collectives_->all_gather_async(halves(gathered, count))->wait();
    backend_.widen_divided(gathered, out, count, 1.0f);  // exact: float(x) / 1
    return;
  }
  // The gather is in place: this rank's input goes to its segment first.
  if (in != out + at) backend_.copy(out + at, in, count_per_rank);
  collectives_->all_gather_async(floats(out, count))->wait();
}

void DeviceTensorGroup::reduce_scatter_sum(float* data, float* out, size_t count_per_rank) {
  const size_t count = count_per_rank * size_t(size());
  if (!bf16_) {
    collectives_->reduce_scatter_async(floats(data, count), floats(out, count_per_rank), comm::ReduceKind::Sum)
        ->wait();
    return;
  }
  Bf16* rounded = wire(count);
  Bf16* own = rounded + count_per_rank * size_t(rank());
  backend_.to_bf16(data, rounded, count);
  collectives_->reduce_scatter_async(halves(rounded, count), halves(own, count_per_rank), comm::ReduceKind::Sum)
      ->wait();
  backend_.widen_divided(own, out, count_per_rank, 1.0f);
}

}  // namespace meshtrain::parallel
