#include "meshtrain/checkpoint/dtype.hpp"

#include <array>

namespace meshtrain::checkpoint {

namespace {
struct DtypeRow {
  Dtype dtype;
  std::string_view name;
  size_t size;
};
// One row per enumerator, in enum order, so the enum value indexes the table.
constexpr std::array<DtypeRow, 16> kDtypes{{
    {Dtype::BOOL, "BOOL", 1}, {Dtype::U8, "U8", 1},       {Dtype::I8, "I8", 1},
    {Dtype::F8_E5M2, "F8_E5M2", 1}, {Dtype::F8_E4M3, "F8_E4M3", 1}, {Dtype::F8_E8M0, "F8_E8M0", 1},
    {Dtype::I16, "I16", 2},   {Dtype::U16, "U16", 2},     {Dtype::F16, "F16", 2},
    {Dtype::BF16, "BF16", 2}, {Dtype::I32, "I32", 4},     {Dtype::U32, "U32", 4},
    {Dtype::F32, "F32", 4},   {Dtype::F64, "F64", 8},     {Dtype::I64, "I64", 8},
    {Dtype::U64, "U64", 8},
}};
}  // namespace

size_t dtype_size(Dtype dtype) { return kDtypes[static_cast<size_t>(dtype)].size; }

std::string_view dtype_name(Dtype dtype) { return kDtypes[static_cast<size_t>(dtype)].name; }

std::optional<Dtype> parse_dtype(std::string_view name) {
  for (const auto& row : kDtypes)
    if (row.name == name) return row.dtype;
  return std::nullopt;
}

float f16_to_float(uint16_t bits) {
  const uint32_t sign = uint32_t(bits & 0x8000) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1f, mantissa = bits & 0x3ff;
  if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));  // inf, NaN
  if (exponent != 0) return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
  // Zero or subnormal: mantissa x 2^-24, exact in float.
  const float magnitude = float(mantissa) * 0x1p-24f;
  return sign ? -magnitude : magnitude;
}

}  // namespace meshtrain::checkpoint
