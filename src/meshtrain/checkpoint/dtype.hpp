#pragma once
// Element types a safetensors file can name, with their spelling in the
// header and their size in bytes. Sub-byte types (F4, F6_*) are left out:
// nothing in meshtrain writes them, and their byte size is not numel * size.
#include <bit>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace meshtrain::checkpoint {

enum class Dtype : uint8_t {
  BOOL, U8, I8, F8_E5M2, F8_E4M3, F8_E8M0, I16, U16, F16, BF16, I32, U32, F32, F64, I64, U64,
};

// Size of one element in bytes.
size_t dtype_size(Dtype dtype);
// The header's spelling, e.g. "F32".
std::string_view dtype_name(Dtype dtype);
// The dtype spelled `name` in a header, or nullopt for one we do not know.
std::optional<Dtype> parse_dtype(std::string_view name);

// F32, BF16 and F16: the dtypes a parameter read widens to float.
constexpr bool widens_to_float(Dtype dtype) { return dtype == Dtype::F32 || dtype == Dtype::BF16 || dtype == Dtype::F16; }
// bfloat16 is float's upper 16 bits.
inline float bf16_to_float(uint16_t bits) { return std::bit_cast<float>(uint32_t(bits) << 16); }
// IEEE binary16 (1 sign, 5 exponent, 10 mantissa bits), subnormals, infinities and NaN included.
float f16_to_float(uint16_t bits);

// The dtype of a C++ element type, for typed reads and writes.
template <typename T> constexpr Dtype dtype_of();
template <> constexpr Dtype dtype_of<float>() { return Dtype::F32; }
template <> constexpr Dtype dtype_of<double>() { return Dtype::F64; }
template <> constexpr Dtype dtype_of<int32_t>() { return Dtype::I32; }
template <> constexpr Dtype dtype_of<int64_t>() { return Dtype::I64; }
template <> constexpr Dtype dtype_of<uint8_t>() { return Dtype::U8; }
template <> constexpr Dtype dtype_of<int8_t>() { return Dtype::I8; }
template <> constexpr Dtype dtype_of<int16_t>() { return Dtype::I16; }
template <> constexpr Dtype dtype_of<uint16_t>() { return Dtype::U16; }
template <> constexpr Dtype dtype_of<uint32_t>() { return Dtype::U32; }
template <> constexpr Dtype dtype_of<uint64_t>() { return Dtype::U64; }
template <> constexpr Dtype dtype_of<bool>() { return Dtype::BOOL; }

}  // namespace meshtrain::checkpoint
