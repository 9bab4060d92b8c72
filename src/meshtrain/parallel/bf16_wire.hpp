#pragma once
// A sum over a group with the values crossing the wire in bf16
// (parallel.reduce_dtype = "bf16"): each rank's values rounded, combined in
// fp32 and rounded back at each step (comm's BF16, in the algorithm's fixed
// order, so every rank gets the same bits), then widened exactly into data.
#include <span>

#include "meshtrain/comm/device/device_collectives.hpp"
#include "meshtrain/comm/group/process_group.hpp"
#include "meshtrain/core/aligned_buffer.hpp"
#include "meshtrain/core/device_array.hpp"
#include "meshtrain/kernels/backend.hpp"
#include "meshtrain/kernels/bf16.hpp"

namespace meshtrain::parallel {

// data summed over `group` in place; `wire` is the bf16 staging buffer (grown as needed).
inline void all_reduce_sum_in_bf16(comm::ProcessGroup& group, std::span<float> data, AlignedBuffer<Bf16>& wire) {
  kernels::to_bf16(data.data(), data.size(), wire);
  group.all_reduce(wire.span(), comm::ReduceKind::Sum);
  kernels::to_float(wire.data(), data.data(), data.size());
}

// The same for values in `backend`'s memory over device collectives
// (comm/device/), rounded and widened there; `wire` is in that memory.
// Host-staged, the host group's bits.
inline void all_reduce_sum_in_bf16(comm::DeviceCollectives& group, kernels::Backend& backend, float* data,
                                   size_t count, DeviceArray<Bf16>& wire) {
  wire.ensure(count);
  backend.to_bf16(data, wire.raw(), count);
  group.all_reduce_async(comm::Buffer(wire.raw(), count, comm::DataType::BF16), comm::ReduceKind::Sum)->wait();
  backend.widen_divided(wire.raw(), data, count, 1.0f);  // exact: float(x) / 1
}

}  // namespace meshtrain::parallel
