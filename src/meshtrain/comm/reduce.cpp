#include "meshtrain/comm/reduce.hpp"

#include <algorithm>

#include "meshtrain/core/bf16.hpp"
#include "meshtrain/core/error.hpp"

namespace meshtrain::comm {
namespace {

// dst = op(dst, src), or with SrcFirst dst = op(src, dst).
template <bool SrcFirst, class T>
void apply(T* __restrict dst, const T* __restrict src, size_t n, ReduceOp op) {
  // Plain loops that the compiler vectorizes; no threads, since callers
  // reduce chunk by chunk while the transport moves the next one.
  auto combine = [](T a, T b, auto f) { return SrcFirst ? f(b, a) : f(a, b); };
  switch (op) {
    case ReduceOp::Sum:
      for (size_t i = 0; i < n; ++i) dst[i] = combine(dst[i], src[i], [](T a, T b) { return a + b; });
      break;
    case ReduceOp::Max:
      for (size_t i = 0; i < n; ++i) dst[i] = combine(dst[i], src[i], [](T a, T b) { return std::max(a, b); });
      break;
    case ReduceOp::Min:
      for (size_t i = 0; i < n; ++i) dst[i] = combine(dst[i], src[i], [](T a, T b) { return std::min(a, b); });
      break;
  }
}

// The same for bf16: each pair widened to fp32, combined, rounded back.
template <bool SrcFirst>
void apply_bf16(Bf16* __restrict dst, const Bf16* __restrict src, size_t n, ReduceOp op) {
  auto combine = [](float a, float b, auto f) { return SrcFirst ? f(b, a) : f(a, b); };
  switch (op) {
    case ReduceOp::Sum:
      for (size_t i = 0; i < n; ++i)
        dst[i] = to_bf16(combine(to_float(dst[i]), to_float(src[i]), [](float a, float b) { return a + b; }));
      break;
    case ReduceOp::Max:
      for (size_t i = 0; i < n; ++i)
        dst[i] = to_bf16(combine(to_float(dst[i]), to_float(src[i]), [](float a, float b) { return std::max(a, b); }));
      break;
    case ReduceOp::Min:
      for (size_t i = 0; i < n; ++i)
        dst[i] = to_bf16(combine(to_float(dst[i]), to_float(src[i]), [](float a, float b) { return std::min(a, b); }));
      break;
  }
}

template <bool SrcFirst>
void reduce(void* dst, const void* src, size_t bytes, const Reduction& r) {
  const size_t width = dtype_bytes(r.dtype);
  if (bytes % width != 0)
    throw CommError("reduce_into: " + std::to_string(bytes) + " bytes is not a whole number of " +
                    std::string(dtype_name(r.dtype)) + " elements");
  const size_t n = bytes / width;
  switch (r.dtype) {
    case DataType::F32: apply<SrcFirst>(static_cast<float*>(dst), static_cast<const float*>(src), n, r.op); break;
    case DataType::F64: apply<SrcFirst>(static_cast<double*>(dst), static_cast<const double*>(src), n, r.op); break;
    case DataType::I32: apply<SrcFirst>(static_cast<int32_t*>(dst), static_cast<const int32_t*>(src), n, r.op); break;
    case DataType::I64: apply<SrcFirst>(static_cast<int64_t*>(dst), static_cast<const int64_t*>(src), n, r.op); break;
    case DataType::BF16: apply_bf16<SrcFirst>(static_cast<Bf16*>(dst), static_cast<const Bf16*>(src), n, r.op); break;
  }
}

}  // namespace

size_t dtype_bytes(DataType dtype) {
  switch (dtype) {
    case DataType::F32: return 4;
    case DataType::F64: return 8;
    case DataType::I32: return 4;
    case DataType::I64: return 8;
    case DataType::BF16: return 2;
  }
  return 1;
}

std::string_view dtype_name(DataType dtype) {
  switch (dtype) {
    case DataType::F32: return "f32";
    case DataType::F64: return "f64";
    case DataType::I32: return "i32";
    case DataType::I64: return "i64";
    case DataType::BF16: return "bf16";
  }
  return "?";
}

std::string_view reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Max: return "max";
    case ReduceOp::Min: return "min";
  }
  return "?";
}

void reduce_into(void* dst, const void* src, size_t bytes, const Reduction& r) { reduce<false>(dst, src, bytes, r); }

void reduce_into_after(void* dst, const void* src, size_t bytes, const Reduction& r) {
  reduce<true>(dst, src, bytes, r);
}

}  // namespace meshtrain::comm
