#include "meshtrain/comm/collectives/steps.hpp"

#include <algorithm>
#include <bit>
#include <vector>

#include "meshtrain/core/bf16.hpp"
#include "meshtrain/core/error.hpp"

namespace meshtrain::comm::detail {

void exchange_chunked(Transport& t, int send_peer, const std::byte* send, size_t send_bytes, int recv_peer,
                      std::byte* recv, size_t recv_bytes, const Reduction* reduce, size_t chunk_bytes,
                      size_t width) {
  const size_t chunk = std::max(chunk_bytes / width, size_t{1}) * width;
  thread_local std::vector<SendOp> sends;
  thread_local std::vector<RecvOp> recvs;
  sends.clear();
  recvs.clear();
  if (send_peer >= 0) {
    size_t offset = 0;
    do {
      const size_t bytes = std::min(chunk, send_bytes - offset);
      sends.push_back({send_peer, send + offset, bytes});
      offset += bytes;
    } while (offset < send_bytes);
  }
  if (recv_peer >= 0) {
    size_t offset = 0;
    do {
      const size_t bytes = std::min(chunk, recv_bytes - offset);
      recvs.push_back({recv_peer, recv + offset, bytes, reduce});
      offset += bytes;
    } while (offset < recv_bytes);
  }
  t.exchange(sends, recvs);
}

PowerOfTwoFold fold_in(Transport& t, std::byte* data, size_t bytes, const Reduction& reduction, size_t chunk_bytes,
                       size_t width) {
  const int n = t.size(), r = t.rank();
  PowerOfTwoFold fold;
  fold.p = int(std::bit_floor(unsigned(n)));
  fold.extra = n - fold.p;
  if (r < 2 * fold.extra && r % 2 == 0) {
    exchange_chunked(t, r + 1, data, bytes, -1, nullptr, 0, nullptr, chunk_bytes, width);
    exchange_chunked(t, -1, nullptr, 0, r + 1, data, bytes, nullptr, chunk_bytes, width);
    return fold;  // newrank -1: sat out, holds the result
  }
  if (r < 2 * fold.extra) exchange_chunked(t, -1, nullptr, 0, r - 1, data, bytes, &reduction, chunk_bytes, width);
  fold.newrank = r < 2 * fold.extra ? r / 2 : r - fold.extra;
  return fold;
}

void fold_out(Transport& t, const PowerOfTwoFold& fold, const std::byte* data, size_t bytes, size_t chunk_bytes,
              size_t width) {
  const int r = t.rank();
  if (fold.newrank >= 0 && r < 2 * fold.extra)
    exchange_chunked(t, r - 1, data, bytes, -1, nullptr, 0, nullptr, chunk_bytes, width);
}

Reduction reduction_for(ReduceKind op, DataType dtype) {
  switch (op) {
    case ReduceKind::Sum:
    case ReduceKind::Avg: return {dtype, ReduceOp::Sum};
    case ReduceKind::Max: return {dtype, ReduceOp::Max};
    case ReduceKind::Min: return {dtype, ReduceOp::Min};
  }
  return {dtype, ReduceOp::Sum};
}

namespace {
template <class T>
void divide(T* x, size_t count, int n) {
  const T d = T(n);
  for (size_t i = 0; i < count; ++i) x[i] = x[i] / d;
}
}  // namespace

void scale_average(std::byte* data, size_t count, DataType dtype, int n) {
  if (n == 1) return;
  switch (dtype) {
    case DataType::F32: divide(reinterpret_cast<float*>(data), count, n); break;
    case DataType::F64: divide(reinterpret_cast<double*>(data), count, n); break;
    case DataType::I32: divide(reinterpret_cast<int32_t*>(data), count, n); break;
    case DataType::I64: divide(reinterpret_cast<int64_t*>(data), count, n); break;
    case DataType::BF16: {
      Bf16* x = reinterpret_cast<Bf16*>(data);
      for (size_t i = 0; i < count; ++i) x[i] = to_bf16(to_float(x[i]) / float(n));
      break;
    }
  }
}

void invalid(const std::string& what) { throw CommError(what); }

}  // namespace meshtrain::comm::detail
