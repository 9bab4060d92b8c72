#pragma once
// Typed views of the buffers a collective reads and writes. They carry an
// element count and a DataType, never a byte count, so elements and bytes
// cannot be confused at a call site: pg.all_reduce(grads) with a
// std::vector<float> or std::span<float> picks F32 and grads.size().
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>
#include <vector>

#include "meshtrain/comm/reduce.hpp"
#include "meshtrain/core/bf16.hpp"

namespace meshtrain::comm {

template <class T>
constexpr DataType dtype_of() {
  using U = std::remove_cv_t<T>;
  if constexpr (std::same_as<U, float>) return DataType::F32;
  else if constexpr (std::same_as<U, double>) return DataType::F64;
  else if constexpr (std::same_as<U, int32_t>) return DataType::I32;
  else if constexpr (std::same_as<U, int64_t>) return DataType::I64;
  else if constexpr (std::same_as<U, Bf16>) return DataType::BF16;
  else static_assert(sizeof(U) == 0, "collectives support float, double, int32_t, int64_t and Bf16");
}

struct Buffer {
  void* data = nullptr;
  size_t count = 0;  // elements
  DataType dtype = DataType::F32;

  Buffer() = default;
  Buffer(void* data, size_t count, DataType dtype) : data(data), count(count), dtype(dtype) {}
  template <class T>
    requires(!std::is_const_v<T>)
  Buffer(std::span<T> s) : data(s.data()), count(s.size()), dtype(dtype_of<T>()) {}
  template <class T>
  Buffer(std::vector<T>& v) : data(v.data()), count(v.size()), dtype(dtype_of<T>()) {}
  size_t bytes() const { return count * dtype_bytes(dtype); }
};

struct ConstBuffer {
  const void* data = nullptr;
  size_t count = 0;  // elements
  DataType dtype = DataType::F32;

  ConstBuffer() = default;
  ConstBuffer(const void* data, size_t count, DataType dtype) : data(data), count(count), dtype(dtype) {}
  ConstBuffer(const Buffer& b) : data(b.data), count(b.count), dtype(b.dtype) {}
  template <class T>
  ConstBuffer(std::span<T> s) : data(s.data()), count(s.size()), dtype(dtype_of<T>()) {}
  template <class T>
  ConstBuffer(const std::vector<T>& v) : data(v.data()), count(v.size()), dtype(dtype_of<T>()) {}
  size_t bytes() const { return count * dtype_bytes(dtype); }
};

}  // namespace meshtrain::comm
