#pragma once
// Element-wise reductions of the collectives: dst[i] = op(dst[i], src[i]).
// Shared by the collective algorithms and by transports that reduce while
// receiving. The order of operands is fixed, so results are bitwise
// deterministic for a given algorithm and group.
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace meshtrain::comm {

// BF16 (core/bf16.hpp) combines in fp32 and rounds each result back to bf16,
// as NCCL does: a sum over n ranks rounds n - 1 times.
enum class DataType { F32, F64, I32, I64, BF16 };
enum class ReduceOp { Sum, Max, Min };  // average = Sum, then a scale by 1/n (see collectives)

struct Reduction {
  DataType dtype = DataType::F32;
  ReduceOp op = ReduceOp::Sum;
};

size_t dtype_bytes(DataType dtype);
std::string_view dtype_name(DataType dtype);
std::string_view reduce_op_name(ReduceOp op);

// dst = op(dst, src) over `bytes` bytes (a multiple of the element size).
void reduce_into(void* dst, const void* src, size_t bytes, const Reduction& reduction);
// dst = op(src, dst): dst's values come after src's, for algorithms that fix
// the operand order by rank without a copy (max(+0, -0) != max(-0, +0)).
void reduce_into_after(void* dst, const void* src, size_t bytes, const Reduction& reduction);

}  // namespace meshtrain::comm
